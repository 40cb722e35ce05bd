// oidc-provider ships no types; the tests use it only as a peer OAuth server.
declare module 'oidc-provider';
