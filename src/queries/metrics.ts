import { Gauge, type Registry } from 'prom-client';

export interface QueryMetrics {
  waiters: Gauge;
}

export function queryMetrics(registry: Registry): QueryMetrics {
  return {
    waiters: new Gauge({
      name: 'underwriting_longpoll_waiters',
      help: 'Long-polls this instance is holding open right now',
      registers: [registry],
    }),
  };
}
