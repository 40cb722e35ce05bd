/** Anything that can hand out a currently valid bearer token for the provider's product APIs. */
export interface BearerTokenSource {
  /** Resolves with a valid access token, or rejects with TokenUnavailableError. */
  getToken(): Promise<string>;
  /** The current token's timing (never the token), undefined before the first one; for statistics. */
  status?(): { expiresAt: Date; renewAt: Date } | undefined;
}
