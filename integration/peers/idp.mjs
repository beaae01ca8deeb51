// A real OpenID provider for Baton's identity tests: panva's oidc-provider (certified),
// issuing signed JWT access tokens (RFC 9068, typ at+jwt) through resource indicators.
// Users: the clients alice and bob get tokens with sub = their client id (client
// credentials); the chat page's public client signs users in with code + PKCE through the
// development login pages. Test hooks: POST /test/rotate puts a new signing key first and
// keeps one previous key published. The RFC 8693 grant exchanges a user's token for one
// with another audience (same sub, act = the caller). Settings from
// ../../../shared/reference/oidc.md §3, verified with oidc-provider 9.13.3.
import http from 'node:http';
import { generateKeyPairSync, randomUUID } from 'node:crypto';
import { Provider, errors } from 'oidc-provider';
import { jwtVerify, createLocalJWKSet } from 'jose';

const PORT = Number(process.env.PORT || 9400);
const ISSUER = `http://127.0.0.1:${PORT}`;
const REDIRECTS = (process.env.CHAT_REDIRECTS || '').split(',').filter(Boolean);
// The chat page's client ('chat'): its tokens are for CHAT_RESOURCE (urn:baton-short makes
// the page renew them), and it gets a refresh token (rotated on use, as for any public
// client, and ending with the provider session) without asking for offline_access, unless
// CHAT_REFRESH=0.
const CHAT_RESOURCE = process.env.CHAT_RESOURCE || 'urn:baton';
const CHAT_REFRESH = process.env.CHAT_REFRESH !== '0';
const TE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const AT = 'urn:ietf:params:oauth:token-type:access_token';
const JWT = 'urn:ietf:params:oauth:token-type:jwt';
const newKey = () => ({ ...generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ format: 'jwk' }),
  kid: randomUUID(), alg: 'ES256', use: 'sig' });
let keys = [newKey()]; // keys[0] signs

const rs = (audience, scope, accessTokenTTL) => ({ audience, scope, accessTokenTTL, accessTokenFormat: 'jwt', jwt: { sign: { alg: 'ES256' } } });
const servers = {
  'urn:baton': rs('baton', 'runs:read runs:write', 300),
  'urn:baton-short': rs('baton', 'runs:read runs:write', 2),
  'urn:baton-15s': rs('baton', 'runs:read runs:write', 15),
  'urn:other': rs('other', 'runs:read', 300),
  'urn:tools': rs('tools', 'tools:call', 120),
  'urn:agent': rs('research-agent', 'agent:call', 120),
};
const cc = (id) => ({ client_id: id, client_secret: `${id}-secret`, grant_types: ['client_credentials'], redirect_uris: [], response_types: [] });
// Exchanges refused for this subject: a test of the refused path.
const REFUSE_SUB = process.env.REFUSE_SUB || 'mallory';

function build() {
  const p = new Provider(ISSUER, {
    jwks: { keys },
    clientDefaults: { id_token_signed_response_alg: 'ES256' }, // keys are EC; the default is RS256
    clients: [cc('alice'), cc('bob'), cc('mallory'),
      { client_id: 'baton', client_secret: 'baton-secret', grant_types: [TE], redirect_uris: [], response_types: [] },
      { client_id: 'chat', token_endpoint_auth_method: 'none', grant_types: ['authorization_code', 'refresh_token'],
        response_types: ['code'], redirect_uris: REDIRECTS.length ? REDIRECTS : ['http://127.0.0.1:8080/'] }],
    extraTokenClaims: (ctx, t) => (t.gty === 'token-exchange' ? { act: { sub: t.clientId } } : undefined), // RFC 8693 §4.1
    issueRefreshToken: async (ctx, client, code) => client.grantTypeAllowed('refresh_token')
      && (code.scopes.has('offline_access') || (client.clientId === 'chat' && CHAT_REFRESH)),
    findAccount: (ctx, sub) => ({ accountId: sub, claims: () => ({ sub }) }), // any login name
    features: {
      devInteractions: { enabled: true }, // test-only login pages
      clientCredentials: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: (ctx, client) => (client?.clientId === 'chat' ? CHAT_RESOURCE : 'urn:baton'),
        useGrantedResource: () => true,
        getResourceServerInfo: (ctx, resource) => { if (servers[resource]) return servers[resource]; throw new errors.InvalidTarget(); },
      },
    },
  });
  p.registerGrantType(TE, async (ctx) => { // RFC 8693: same sub, act = caller
    const { subject_token: st, subject_token_type: stt, resource, audience } = ctx.oidc.params;
    // Baton sends the user's inbound JWT as a JWT (RFC 8693 §3); anything else is refused here,
    // so a change of type fails the exchange tests.
    if (stt !== JWT) throw new errors.InvalidRequest('unsupported subject_token_type');
    const key = resource || Object.keys(servers).find((k) => servers[k].audience === audience);
    const srv = servers[key];
    if (!srv) throw new errors.InvalidTarget();
    let claims;
    try {
      ({ payload: claims } = await jwtVerify(st, createLocalJWKSet({ keys: keys.map(({ d, ...pub }) => pub) }),
        { issuer: ISSUER, audience: 'baton', typ: 'at+jwt' }));
    } catch (e) { throw new errors.InvalidRequest(`invalid subject_token (${e.code || e.message})`); } // RFC 8693 §2.2.2
    if (claims.sub === REFUSE_SUB) throw new errors.InvalidTarget('this user may not reach that audience');
    const token = new ctx.oidc.provider.AccessToken({ accountId: claims.sub, client: ctx.oidc.client,
      gty: 'token-exchange', scope: srv.scope });
    token.resourceServer = srv;
    ctx.body = { access_token: await token.save(), issued_token_type: AT, token_type: 'Bearer',
      expires_in: token.expiration, scope: srv.scope };
  }, ['audience', 'resource', 'scope', 'requested_token_type', 'subject_token', 'subject_token_type',
    'actor_token', 'actor_token_type'], ['audience', 'resource']);
  return p;
}

let provider = build();
http.createServer((req, res) => {
  if (req.method === 'POST' && req.url === '/test/rotate') {
    keys = [newKey(), ...keys].slice(0, 2); provider = build();
    res.end(keys[0].kid); return;
  }
  provider.callback()(req, res);
}).listen(PORT, '127.0.0.1', () => console.log(`issuer ${ISSUER}`));
