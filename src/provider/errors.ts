/** The provider answered, and the answer was no (non-2xx). */
export class UpstreamRejectedError extends Error {
  constructor(
    readonly upstreamStatus: number,
    /** A short excerpt of the provider's body, for the stored request, never for logs with secrets. */
    readonly bodyExcerpt: string,
  ) {
    super(`provider answered ${upstreamStatus}`);
    this.name = 'UpstreamRejectedError';
  }
}

/** The provider could not be reached, or did not answer in time. */
export class UpstreamUnavailableError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'UpstreamUnavailableError';
  }
}

/** A bearer token is configured but could not be obtained; nothing may be sent upstream without it. */
export class TokenUnavailableError extends Error {
  /** What the operator should check, for the log; given once per failure streak, never a secret. */
  readonly hint: string | undefined;

  constructor(message: string, options?: ErrorOptions & { hint?: string | undefined }) {
    super(message, options);
    this.name = 'TokenUnavailableError';
    this.hint = options?.hint;
  }
}
