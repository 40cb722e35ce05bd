import { Counter, Gauge, type Registry } from 'prom-client';

export interface LifecycleMetrics {
  expired: Counter;
}

// underwriting_pending_requests is read once per scrape with /v1/stats' own statement: src/stats/metrics.ts.
export function lifecycleMetrics(registry: Registry, callbackTimeoutS: number): LifecycleMetrics {
  // Configuration as a metric, so an alert compares the oldest pending request's age with it.
  new Gauge({
    name: 'underwriting_callback_timeout_seconds',
    help: 'CALLBACK_TIMEOUT_S: a submitted request with no callback after this long becomes expired',
    registers: [registry],
  }).set(callbackTimeoutS);
  return {
    expired: new Counter({
      name: 'underwriting_expired_total',
      help: 'Requests this instance marked expired because their callback did not come in time',
      registers: [registry],
    }),
  };
}
