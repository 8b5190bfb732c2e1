// A real, certified OpenID Connect provider (panva's oidc-provider) for Orbit Console's tests,
// started by tests/support/oidc.py: `node provider.mjs` with its configuration in the
// environment.
//
//   OIDC_PORT      the port to listen on (127.0.0.1)
//   OIDC_CLIENTS   JSON: the clients (oidc-provider's client metadata)
//   OIDC_QUIRKS    JSON: how this provider departs from the suite's usual one, as real providers
//                  do (tests/support/oidc.py, Quirks, names them and the providers that have them):
//     issuer_trailing_slash  the issuer ends with "/" (and so does every token's iss)
//     refresh_tokens         false: no refresh token is ever issued
//     auth_time              "when_asked": auth_time only in ID tokens asked with max_age or
//                            prompt=login (oidc-provider's own default); "always": in every one
//     groups_in_id_token     the groups claim rides in the ID token too (not only userinfo)
//     groups_claim           the name of the claim that carries the groups (Entra ID's app
//                            roles: "roles"; Auth0: a namespaced claim an Action sets)
//     groups_scope           false: no "groups" scope asks for the groups claim; it rides in
//                            every ID token (Okta's claim "included in any scope", Keycloak's
//                            mapper on the client's own scope, Entra ID, Auth0, Authentik)
//     backchannel_logout     false: no back-channel logout (not in discovery, none sent)
//     prompt_login           false: an authorization request with prompt=login is refused
//                            (invalid_request), as Google, which takes none, consent and
//                            select_account only
//     client_auth            null, or the one way the token endpoint takes the client's secret:
//                            "client_secret_post" (in the body: Auth0's "Post" applications) or
//                            "client_secret_basic" (an HTTP Basic header: Okta's default); the
//                            other is refused (401 invalid_client) and discovery lists only it
//     scopes                 null, or the only scopes a request may ask for: any other is
//                            refused (invalid_scope), as Okta's default authorization server
//                            without a "groups" scope and Keycloak 10+ with an unknown scope
//                  A quirk not listed in QUIRKS below stops the start: a typo is never ignored.
//
// The sign-in form is oidc-provider's own (its dev interactions): any login name signs in as
// that person, with any password; consent is given for every client (first party).
//
// Besides the provider, a few routes under /test/ let a test play the identity team:
//   PUT  /test/accounts/:sub      {"groups": [...], "disabled": bool, "name": "...",
//                                  "claims": {"preferred_username": "...", "email": null, ...}}
//                                 (claims: over the defaults below; null leaves a claim out)
//   POST /test/backchannel/:sub   send every client a back-channel logout token for that person
//   POST /test/sign               {"claims": {...}, "typ": "..."}: a JWT signed with the
//                                 provider's own key (for tests of expired or odd tokens)
//   GET  /test/backchannel-log    what the back-channel deliveries answered
import crypto from 'node:crypto';

import Provider, { interactionPolicy } from 'oidc-provider';

// Each quirk with its usual value. To add one: a key here, what it changes below, and the same
// name in tests/support/oidc.py's Quirks.
const QUIRKS = {
  issuer_trailing_slash: false,
  refresh_tokens: true,
  auth_time: 'when_asked',
  groups_in_id_token: false,
  groups_claim: 'groups',
  groups_scope: true,
  backchannel_logout: true,
  prompt_login: true,
  client_auth: null,
  scopes: null,
};
const quirks = { ...QUIRKS, ...JSON.parse(process.env.OIDC_QUIRKS || '{}') };
for (const name of Object.keys(quirks)) {
  if (!(name in QUIRKS)) throw new Error(`provider.mjs has no quirk named ${name}`);
}
if (!['when_asked', 'always'].includes(quirks.auth_time)) {
  throw new Error(`auth_time is "when_asked" or "always", not ${quirks.auth_time}`);
}

const port = Number(process.env.OIDC_PORT);
const issuer = `http://127.0.0.1:${port}${quirks.issuer_trailing_slash ? '/' : ''}`;
const clients = JSON.parse(process.env.OIDC_CLIENTS || '[]').map((client) => {
  const shaped = quirks.auth_time === 'always' ? { ...client, require_auth_time: true } : { ...client };
  if (quirks.client_auth) shaped.token_endpoint_auth_method = quirks.client_auth;
  if (!quirks.backchannel_logout) {
    delete shaped.backchannel_logout_uri;
    delete shaped.backchannel_logout_session_required;
  }
  return shaped;
});
// Without a groups scope the groups claim is in every ID token, as is Google's hosted domain (hd).
const everyIdToken = quirks.groups_scope ? ['hd'] : ['hd', quirks.groups_claim];

const { privateKey } = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
const kid = crypto.randomBytes(8).toString('hex');
const signingJwk = { ...privateKey.export({ format: 'jwk' }), kid, use: 'sig', alg: 'RS256' };

// The identity team's directory: sub -> {groups, disabled, name}. Unknown people sign in with
// no groups.
const accounts = new Map();
// sub -> Map(clientId -> Set(sid)), to name sessions in back-channel logout tokens.
const sessions = new Map();
const backchannelLog = [];

function account(sub) {
  if (!accounts.has(sub)) accounts.set(sub, { groups: [], disabled: false, name: sub });
  return accounts.get(sub);
}

// A person disabled here is signed in here no more: their session asks for a sign-in again
// (prompt=none is answered login_required), as a real provider's does when it ends the sessions
// of a disabled account.
const policy = interactionPolicy.base();
const { Check } = interactionPolicy;
policy.get('login').checks.add(new Check(
  'account_disabled',
  'the account is disabled',
  'login_required',
  (ctx) => (ctx.oidc.account ? Check.NO_NEED_TO_PROMPT : Check.REQUEST_PROMPT),
));

const provider = new Provider(issuer, {
  interactions: { policy },
  clients,
  jwks: { keys: [signingJwk] },
  cookies: { keys: [crypto.randomBytes(32).toString('hex')] },
  scopes: ['openid', 'offline_access', 'profile', 'email', 'groups'],
  claims: {
    openid: ['sub', ...everyIdToken],
    profile: ['name', 'preferred_username'],
    email: ['email', 'email_verified'],
    groups: quirks.groups_scope ? [quirks.groups_claim] : [],
  },
  conformIdTokenClaims: quirks.groups_scope && !quirks.groups_in_id_token,
  acrValues: ['urn:orbit:password', 'urn:orbit:mfa'],
  features: {
    devInteractions: { enabled: true },
    backchannelLogout: { enabled: quirks.backchannel_logout },
    rpInitiatedLogout: { enabled: true },
    revocation: { enabled: true },
  },
  pkce: { required: () => true, methods: ['S256'] },
  ...(quirks.client_auth ? { clientAuthMethods: [quirks.client_auth] } : {}),
  // Back-channel deliveries wait for the console as long as its tests do: oidc-provider's own
  // 2.5 s gave up on a console sharing two busy cores with other suites.
  httpOptions: () => ({ signal: AbortSignal.timeout(20_000) }),
  ttl: {
    AccessToken: 600,
    AuthorizationCode: 60,
    IdToken: 600,
    RefreshToken: 24 * 3600,
    Interaction: 600,
    Session: 24 * 3600,
    Grant: 24 * 3600,
  },
  // First party: every client is granted what it asks, without a consent page.
  async loadExistingGrant(ctx) {
    const grantId =
      ctx.oidc.result?.consent?.grantId || ctx.oidc.session.grantIdFor(ctx.oidc.client.clientId);
    let grant = grantId ? await ctx.oidc.provider.Grant.find(grantId) : undefined;
    if (!grant) {
      grant = new ctx.oidc.provider.Grant({
        clientId: ctx.oidc.client.clientId,
        accountId: ctx.oidc.session.accountId,
      });
    }
    grant.addOIDCScope('openid offline_access profile email groups');
    await grant.save();
    return grant;
  },
  // Refresh tokens for every client allowed the grant (the console re-checks with them), unless
  // this provider issues none.
  async issueRefreshToken(ctx, client) {
    return quirks.refresh_tokens && client.grantTypeAllowed('refresh_token');
  },
  async findAccount(ctx, sub) {
    const found = account(sub);
    if (found.disabled) return undefined;
    return {
      accountId: sub,
      async claims() {
        const claims = {
          sub,
          name: found.name,
          preferred_username: sub,
          email: `${sub}@example.com`,
          email_verified: true,
          [quirks.groups_claim]: found.groups,
          ...(found.claims ?? {}),
        };
        for (const [key, value] of Object.entries(claims)) if (value === null) delete claims[key];
        return claims;
      },
    };
  },
});
provider.proxy = false;

provider.on('authorization.success', (ctx) => {
  const session = ctx.oidc.session;
  const clientId = ctx.oidc.client?.clientId;
  if (!session?.accountId || !clientId) return;
  const byClient = sessions.get(session.accountId) ?? new Map();
  sessions.set(session.accountId, byClient);
  const sids = byClient.get(clientId) ?? new Set();
  byClient.set(clientId, sids);
  sids.add(session.sidFor(clientId));
});
provider.on('backchannel.success', (ctx, client, sub, sid) => {
  backchannelLog.push({ client: client.clientId, sub, sid, ok: true });
});
provider.on('backchannel.error', (ctx, err, client, sub, sid) => {
  backchannelLog.push({ client: client.clientId, sub, sid, ok: false, error: String(err) });
});

// What a provider of this shape refuses at its authorization endpoint, answered as an OP answers
// a request from a known client with a registered redirect_uri: back to it, with the error.
function refusalOf(query) {
  const prompts = String(query.prompt ?? '').split(' ');
  if (!quirks.prompt_login && prompts.includes('login')) {
    return ['invalid_request', 'Invalid parameter value for prompt: Invalid prompt: login'];
  }
  if (quirks.scopes !== null) {
    const unknown = String(query.scope ?? '').split(' ').filter((s) => s && !quirks.scopes.includes(s));
    if (unknown.length) return ['invalid_scope', `The requested scope is invalid: ${unknown.join(' ')}`];
  }
  return null;
}

provider.use(async (ctx, next) => {
  if (ctx.path !== '/auth' || ctx.method !== 'GET') return next();
  const refusal = refusalOf(ctx.query);
  const client = refusal && (await provider.Client.find(String(ctx.query.client_id ?? '')));
  if (!refusal || !client?.redirectUriAllowed(String(ctx.query.redirect_uri ?? ''))) return next();
  const back = new URL(String(ctx.query.redirect_uri));
  back.searchParams.set('error', refusal[0]);
  back.searchParams.set('error_description', refusal[1]);
  if (ctx.query.state) back.searchParams.set('state', String(ctx.query.state));
  ctx.redirect(back.href);
  return undefined;
});

// oidc-provider takes a client's secret either way whatever the client registered; a provider
// of this shape takes it only the one way.
provider.use(async (ctx, next) => {
  if (!quirks.client_auth || ctx.path !== '/token' || ctx.method !== 'POST') return next();
  const basic = /^basic /i.test(String(ctx.get('authorization')));
  if (basic !== (quirks.client_auth === 'client_secret_basic')) {
    ctx.status = 401;
    ctx.body = {
      error: 'invalid_client',
      error_description: `client authentication must be ${quirks.client_auth}`,
    };
    return undefined;
  }
  return next();
});

function b64url(value) {
  return Buffer.from(typeof value === 'string' ? value : JSON.stringify(value)).toString('base64url');
}

function sign(claims, typ) {
  const header = { alg: 'RS256', kid, ...(typ ? { typ } : {}) };
  const input = `${b64url(header)}.${b64url(claims)}`;
  const signature = crypto.sign('RSA-SHA256', Buffer.from(input), privateKey).toString('base64url');
  return `${input}.${signature}`;
}

async function readJson(ctx) {
  const chunks = [];
  for await (const chunk of ctx.req) chunks.push(chunk);
  const text = Buffer.concat(chunks).toString() || '{}';
  return JSON.parse(text);
}

provider.use(async (ctx, next) => {
  const path = ctx.path;
  if (!path.startsWith('/test/')) return next();
  const accountMatch = path.match(/^\/test\/accounts\/([^/]+)$/);
  const backchannelMatch = path.match(/^\/test\/backchannel\/([^/]+)$/);
  if (accountMatch && ctx.method === 'PUT') {
    const sub = decodeURIComponent(accountMatch[1]);
    Object.assign(account(sub), await readJson(ctx));
    ctx.body = account(sub);
  } else if (backchannelMatch && ctx.method === 'POST') {
    const sub = decodeURIComponent(backchannelMatch[1]);
    const sent = [];
    for (const [clientId, sids] of sessions.get(sub) ?? new Map()) {
      const client = await provider.Client.find(clientId);
      if (!client?.backchannelLogoutUri) continue;
      for (const sid of sids) {
        try {
          await client.backchannelLogout(sub, sid);
          sent.push({ client: clientId, sid, ok: true });
        } catch (err) {
          sent.push({ client: clientId, sid, ok: false, error: String(err) });
        }
      }
    }
    sessions.delete(sub);
    ctx.body = { sent };
  } else if (path === '/test/sign' && ctx.method === 'POST') {
    const { claims, typ } = await readJson(ctx);
    ctx.body = { token: sign(claims, typ) };
  } else if (path === '/test/backchannel-log' && ctx.method === 'GET') {
    ctx.body = backchannelLog;
  } else {
    ctx.status = 404;
  }
  return undefined;
});

provider.listen(port, '127.0.0.1', () => {
  process.stdout.write(`oidc-provider listening on ${issuer}\n`);
});
