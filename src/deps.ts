import type { Tracer } from '@opentelemetry/api';
import type { Registry } from 'prom-client';
import type { NotificationChannel } from './channels/channel.js';
import type { Config } from './config/config.js';
import type { DatabaseHandle } from './db/handle.js';
import type { AppDeliveryHandoff } from './events/handoff.js';
import type { IngestLoad } from './timing/ingest-load.js';
import type { BearerTokenSource } from './provider/token-source.js';

// What app.ts hands to every capability; it lives below both so that arrows only run downwards.

export type Clock = () => Date;

/** What every capability plugin receives: the app's dependencies, resolved. */
export interface CapabilityDeps {
  config: Readonly<Config>;
  database: DatabaseHandle;
  clock: Clock;
  /** Set when AUTH_URL/CLIENT_ID are configured: upstream calls then carry a bearer token too. */
  tokenSource: BearerTokenSource | undefined;
  registry: Registry;
  /** Committed callback results, announced by customerUuid; long-polls wait on it. */
  results: NotificationChannel;
  /** Callbacks being answered now: the event push yields to a burst of them. */
  ingest: IngestLoad;
  /** New deliveries from the callback statement to this instance's delivery worker. */
  handoff: AppDeliveryHandoff;
  /** Set when tracing is on: spans are made only then (a request's own parent: traceOf(request)). */
  tracer: Tracer | undefined;
}

/** Bodies above this are refused (413) before they are parsed. */
export const BODY_LIMIT_BYTES = 64 * 1024;
