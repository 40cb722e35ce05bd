import { ROOT_CONTEXT, type SpanKind } from '@opentelemetry/api';
import { getNumberFromEnv, getStringFromEnv } from '@opentelemetry/core';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  type IdGenerator,
  ParentBasedSampler,
  RandomIdGenerator,
  type Sampler,
  SamplingDecision,
  TraceIdRatioBasedSampler,
} from '@opentelemetry/sdk-trace-base';

/** The ids a root span will have, and whether the sampler will record it: what its traceparent says before it begins. */
export interface ReservedRoot {
  traceId: string;
  spanId: string;
  sampled: boolean;
}

/**
 * Root spans whose ids are known before they begin. The callback's server span begins only once
 * its statement has found the submit it completes (then it is that submit's child), but an
 * unmatched callback's event, written by that statement, stores the traceparent the span will
 * have as a root: reserve() gives it, startWith() makes the span with it.
 */
export interface RootIds {
  reserve(name: string, kind: SpanKind): ReservedRoot;
  /** Runs start (which starts one root span, synchronously) with the reserved ids. */
  startWith<T>(reserved: ReservedRoot, start: () => T): T;
}

/** The provider's id generator and sampler, given to the SDK, with the reservations they make possible. */
export interface ReservingIds extends RootIds {
  idGenerator: IdGenerator;
  sampler: Sampler;
}

/**
 * Ids the SDK draws at random, except inside startWith; and the sampler OTEL_TRACES_SAMPLER names,
 * read from the environment as the SDK reads it (the standard samplers decide on the parent and the trace id only, so
 * asking it ahead for a root with the reserved trace id gives the decision the span will get).
 */
export function reservingIds(): ReservingIds {
  const random = new RandomIdGenerator();
  let next: ReservedRoot | undefined;
  const sampler = samplerFromEnv();
  return {
    idGenerator: {
      generateTraceId: () => next?.traceId ?? random.generateTraceId(),
      generateSpanId: () => next?.spanId ?? random.generateSpanId(),
    },
    sampler,
    reserve(name, kind) {
      const traceId = random.generateTraceId();
      const decision = sampler.shouldSample(ROOT_CONTEXT, traceId, name, kind, {}, []).decision;
      return { traceId, spanId: random.generateSpanId(), sampled: decision === SamplingDecision.RECORD_AND_SAMPLED };
    },
    startWith(reserved, start) {
      next = reserved;
      try {
        return start();
      } finally {
        next = undefined;
      }
    },
  };
}

/** The SDK's reading of OTEL_TRACES_SAMPLER and _ARG (sdk-trace-base's config.js); the configuration refused any other value at start. */
function samplerFromEnv(): Sampler {
  const ratio = () => {
    const arg = getNumberFromEnv('OTEL_TRACES_SAMPLER_ARG');
    return arg === undefined || arg < 0 || arg > 1 ? 1 : arg;
  };
  switch (getStringFromEnv('OTEL_TRACES_SAMPLER')) {
    case 'always_on':
      return new AlwaysOnSampler();
    case 'always_off':
      return new AlwaysOffSampler();
    case 'parentbased_always_off':
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'traceidratio':
      return new TraceIdRatioBasedSampler(ratio());
    case 'parentbased_traceidratio':
      return new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(ratio()) });
    default:
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
  }
}
