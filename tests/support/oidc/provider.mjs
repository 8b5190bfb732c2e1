// A real, certified OpenID Connect provider (panva's oidc-provider) for Orbit Console's tests,
// started by tests/support/oidc.py: `node provider.mjs` with its configuration in the
// environment.
//
//   OIDC_PORT                  the port to listen on (127.0.0.1)
//   OIDC_CLIENTS               JSON: the clients (oidc-provider's client metadata)
//   OIDC_GROUPS_IN_ID_TOKEN    "1": the groups claim rides in the ID token too (not only userinfo)
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

import Provider from 'oidc-provider';

const port = Number(process.env.OIDC_PORT);
const issuer = `http://127.0.0.1:${port}`;
const clients = JSON.parse(process.env.OIDC_CLIENTS || '[]');
const groupsInIdToken = process.env.OIDC_GROUPS_IN_ID_TOKEN === '1';

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

const provider = new Provider(issuer, {
  clients,
  jwks: { keys: [signingJwk] },
  cookies: { keys: [crypto.randomBytes(32).toString('hex')] },
  scopes: ['openid', 'offline_access', 'profile', 'email', 'groups'],
  claims: {
    openid: ['sub'],
    profile: ['name', 'preferred_username'],
    email: ['email', 'email_verified'],
    groups: ['groups'],
  },
  conformIdTokenClaims: !groupsInIdToken,
  acrValues: ['urn:orbit:password', 'urn:orbit:mfa'],
  features: {
    devInteractions: { enabled: true },
    backchannelLogout: { enabled: true },
    rpInitiatedLogout: { enabled: true },
    revocation: { enabled: true },
  },
  pkce: { required: () => true, methods: ['S256'] },
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
  // Refresh tokens for every client allowed the grant (the console re-checks with them).
  async issueRefreshToken(ctx, client) {
    return client.grantTypeAllowed('refresh_token');
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
          groups: found.groups,
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
