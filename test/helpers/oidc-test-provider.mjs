// A real OpenID Provider (the certified `oidc-provider`) for the console single sign-on tests, run in
// its own Node process (the package is ESM only). It listens on 127.0.0.1:<free port>, sends its issuer
// over IPC, and takes test controls on /test/*: who signs in next (claims), a rotation of its signing key.
// Sign-in needs no form: its interaction signs in the current user, and every grant is given.
import { generateKeyPairSync, randomUUID } from 'node:crypto';
import http from 'node:http';
import Provider from 'oidc-provider';

let redirectUri = process.env.OIDC_TEST_REDIRECT_URI;
let postLogoutUri = process.env.OIDC_TEST_POST_LOGOUT_URI;
let user = { sub: 'ada', email: 'ada@example.com', groups: ['gateway-admins'] };

const newKey = () => ({
  ...generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ format: 'jwk' }),
  kid: randomUUID(),
  use: 'sig',
  alg: 'RS256',
});

function makeProvider(issuer, key) {
  const provider = new Provider(issuer, {
    clients: [
      {
        client_id: 'gateway',
        client_secret: 'gateway-client-secret-0123456789',
        redirect_uris: [redirectUri],
        post_logout_redirect_uris: [postLogoutUri],
        token_endpoint_auth_method: 'client_secret_basic',
      },
      { client_id: 'gateway-public', token_endpoint_auth_method: 'none', redirect_uris: [redirectUri], post_logout_redirect_uris: [postLogoutUri] },
    ],
    jwks: { keys: [key] },
    cookies: { keys: ['oidc-test-provider-cookie-key'] },
    claims: { openid: ['sub'], email: ['email'], groups: ['groups'] },
    // Groups in the ID token itself, as Keycloak, Okta and Entra ID put them when asked.
    conformIdTokenClaims: false,
    ttl: { IdToken: 60 },
    features: { devInteractions: { enabled: false }, rpInitiatedLogout: { enabled: true } },
    interactions: { url: (_ctx, interaction) => `/test/interaction/${interaction.uid}` },
    findAccount: (_ctx, id) => ({ accountId: id, claims: () => ({ sub: id, email: user.email, groups: user.groups }) }),
    // A first-party client: every scope asked is granted, no consent screen.
    async loadExistingGrant(ctx) {
      const grant = new ctx.oidc.provider.Grant({ clientId: ctx.oidc.client.clientId, accountId: ctx.oidc.session.accountId });
      grant.addOIDCScope('openid email profile groups');
      await grant.save();
      return grant;
    },
  });
  return provider;
}

let provider;
let keys;
const server = http.createServer(async (req, res) => {
  try {
    const url = new URL(req.url, 'http://x');
    if (url.pathname.startsWith('/test/interaction/')) {
      await provider.interactionFinished(req, res, { login: { accountId: user.sub } }, { mergeWithLastSubmission: false });
      return;
    }
    if (url.pathname === '/test/user' && req.method === 'POST') {
      let body = '';
      for await (const chunk of req) body += chunk;
      user = JSON.parse(body);
      res.end('{}');
      return;
    }
    // Where the client's redirects go, once the gateway (which discovers this provider at its start) listens.
    if (url.pathname === '/test/client' && req.method === 'POST') {
      let body = '';
      for await (const chunk of req) body += chunk;
      ({ redirectUri, postLogoutUri } = JSON.parse(body));
      provider = makeProvider(issuer, keys);
      res.end('{}');
      return;
    }
    if (url.pathname === '/test/rotate' && req.method === 'POST') {
      keys = newKey();
      provider = makeProvider(issuer, keys);
      res.end(JSON.stringify({ kid: keys.kid }));
      return;
    }
    provider.callback()(req, res);
  } catch (error) {
    res.statusCode = 500;
    res.end(String(error));
  }
});
let issuer;
server.listen(0, '127.0.0.1', () => {
  issuer = `http://127.0.0.1:${server.address().port}`;
  keys = newKey();
  provider = makeProvider(issuer, keys);
  process.send({ issuer });
});
process.on('disconnect', () => process.exit(0));
