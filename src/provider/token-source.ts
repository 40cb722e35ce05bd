/** Anything that can hand out a currently valid bearer token for the provider's product APIs. */
export interface BearerTokenSource {
  /** Resolves with a valid access token, or rejects with TokenUnavailableError. */
  getToken(): Promise<string>;
  /** The current token's timing (never the token), undefined before the first one; for statistics. */
  status?(): { expiresAt: Date; renewAt: Date } | undefined;
}

/** What may be shown about the bearer token (e.g. by GET /v1/stats): never the token itself. */
export interface TokenState {
  /** A token source is in use: upstream calls carry a bearer token. */
  readonly configured: boolean;
  /** The current token's exp; null before the first token (or from a source that does not say). */
  readonly expiresAt: Date | null;
  /** When it is renewed; null likewise. */
  readonly renewAt: Date | null;
}

/** Reads the token source's state as it is now; a copy, so nothing can be changed through it. */
export function tokenState(source: BearerTokenSource | undefined): TokenState {
  const timing = source?.status?.();
  return {
    configured: source !== undefined,
    expiresAt: timing ? new Date(timing.expiresAt) : null,
    renewAt: timing ? new Date(timing.renewAt) : null,
  };
}
