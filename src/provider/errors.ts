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
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'TokenUnavailableError';
  }
}

/** Anything that can hand out a currently valid bearer token for the provider's product APIs. */
export interface BearerTokenSource {
  /** Resolves with a valid access token, or rejects with TokenUnavailableError. */
  getToken(): Promise<string>;
  /** The current token's timing (never the token), undefined before the first one; for statistics. */
  status?(): { expiresAt: Date; renewAt: Date } | undefined;
}
