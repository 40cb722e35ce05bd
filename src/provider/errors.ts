/** The provider answered, and the answer was no (non-2xx). */
export class UpstreamRejectedError extends Error {
  constructor(
    readonly upstreamStatus: number,
    /** A short excerpt of the provider's body, for the stored request, never for logs with secrets. */
    readonly bodyExcerpt: string,
    /** The provider's Retry-After, in seconds from now, when it sent one (429, 503). */
    readonly retryAfterS: number | undefined = undefined,
  ) {
    super(`provider answered ${upstreamStatus}`);
    this.name = 'UpstreamRejectedError';
  }
}

/** The provider could not be reached, or did not answer in time. */
export class UpstreamUnavailableError extends Error {
  /**
   * True only when the request certainly never left: no connection could be made (refused, no
   * such host, the connect timed out) or there is no provider to call. A reset or a timeout once
   * connected is false: the provider may have read the request.
   */
  readonly notSent: boolean;

  constructor(message: string, options?: ErrorOptions & { notSent?: boolean }) {
    super(message, options);
    this.name = 'UpstreamUnavailableError';
    this.notSent = options?.notSent ?? false;
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
