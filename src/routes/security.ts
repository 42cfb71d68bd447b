/**
 * The security requirement of every authenticated operation: the service's own token or, where the operator has
 * configured an identity provider, a JWT access token from it. The scope each operation needs is in its description
 * and its 403; OpenAPI has no place for the scopes of an http bearer scheme.
 */
export const SECURITY: Array<Record<string, string[]>> = [{ bearerAuth: [] }, { jwtBearer: [] }]
