// The handoff between the statements that write events and this instance's delivery worker: once
// this instance commits events, its worker writes their deliveries and sends them, without
// waiting for the notification every instance hears.

/** Between the statements that write events and this instance's delivery worker. */
export interface DeliveryHandoff {
  /** Events were committed by this instance: write and send their deliveries soon. */
  committed(): void;
}

/** The app's handoff, to which the events plugin attaches its worker (and detaches it on close). */
export interface AppDeliveryHandoff extends DeliveryHandoff {
  attach(worker: DeliveryHandoff | undefined): void;
  /** Endpoints were changed by this instance: its worker reads them again at once (others within a second). */
  endpointsChanged(): Promise<void>;
  /** What endpointsChanged does (the events plugin's registry refresh). */
  onEndpointsChanged(fn: (() => Promise<void>) | undefined): void;
}

/** The app's handoff: hands over to the worker once the events plugin has started one. */
export function deliveryHandoff(): AppDeliveryHandoff {
  let worker: DeliveryHandoff | undefined;
  let refresh: (() => Promise<void>) | undefined;
  return {
    async endpointsChanged() {
      await refresh?.();
    },
    onEndpointsChanged(fn) {
      refresh = fn;
    },
    attach(next) {
      worker = next;
    },
    committed() {
      worker?.committed();
    },
  };
}
