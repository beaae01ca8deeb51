// Sign-in of the chat page with the OpenID provider Baton trusts (server.oidc with a
// client_id): OAuth 2.0 authorization code with PKCE (RFC 7636, S256) for a public client.
//
// Baton serves the page with <meta name="baton-oidc" data-issuer data-client-id>; without it
// the page does not sign in. The provider's endpoints come from its discovery document. The
// access and refresh tokens live in this module's memory only, never in Web Storage: a reload
// signs in again (the provider's own session makes that a pair of redirects). Across the
// redirect, sessionStorage holds only the PKCE verifier, the state and the thread the page
// showed, and they are removed when the page comes back. Hashing and randomness are the
// browser's (crypto.subtle, crypto.getRandomValues); no token is parsed or verified here:
// Baton verifies every token it receives.

const PENDING = "baton.oidc.pending";
// A pending sign-in older than this is not accepted when the provider redirects back.
const PENDING_MAX_AGE_MS = 10 * 60 * 1000;
// A token is renewed this long before it expires (at most a quarter of its lifetime).
const RENEW_BEFORE_MS = 30 * 1000;
// A token refused by Baton within this time of a sign-in is not answered by signing in
// again: the provider would give the same kind of token, and the page would loop.
const FRESH_MS = 30 * 1000;

// SignInError is a sign-in that did not succeed; message is for the user, detail is the
// provider's error code or the HTTP status when there is one.
export class SignInError extends Error {
  constructor(message, detail) {
    super(message);
    this.name = "SignInError";
    this.detail = detail || "";
  }
}

// signInConfig reads the page's sign-in settings; null when Baton serves the page without
// them.
export function signInConfig(doc = document) {
  const m = doc.querySelector('meta[name="baton-oidc"]');
  if (!m || !m.dataset.issuer || !m.dataset.clientId) return null;
  return { issuer: m.dataset.issuer, clientId: m.dataset.clientId };
}

// base64url encodes bytes without padding (RFC 7636 §3).
export function base64url(bytes) {
  let s = "";
  for (const b of bytes) s += String.fromCharCode(b);
  return btoa(s).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

// randomString is n random bytes, base64url-encoded (32 bytes: a 43-character verifier).
export function randomString(n) {
  const b = new Uint8Array(n);
  crypto.getRandomValues(b);
  return base64url(b);
}

// codeChallenge is the S256 challenge of a PKCE verifier (RFC 7636 §4.2).
export async function codeChallenge(verifier) {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier));
  return base64url(new Uint8Array(digest));
}

function sameOrigin(a, b) {
  try {
    return new URL(a).origin === new URL(b).origin;
  } catch (_) {
    return false;
  }
}

// discover reads the issuer's discovery document (OpenID Connect Discovery §4) and checks
// that it is the issuer's and names its endpoints.
async function discover(issuer) {
  let resp;
  try {
    resp = await fetch(issuer.replace(/\/+$/, "") + "/.well-known/openid-configuration", {
      headers: { Accept: "application/json" },
      credentials: "omit",
    });
  } catch (e) {
    throw new SignInError("Cannot reach the sign-in provider.", String((e && e.message) || e));
  }
  if (!resp.ok) throw new SignInError("The sign-in provider did not describe itself.", "HTTP " + resp.status);
  let meta;
  try {
    meta = await resp.json();
  } catch (_) {
    throw new SignInError("The sign-in provider did not describe itself.", "not JSON");
  }
  if (!meta || meta.issuer !== issuer) throw new SignInError("The sign-in provider names another issuer.", "issuer mismatch");
  for (const k of ["authorization_endpoint", "token_endpoint"]) {
    if (typeof meta[k] !== "string" || !/^https?:\/\//.test(meta[k])) throw new SignInError("The sign-in provider has no usable " + k + ".");
  }
  if (!sameOrigin(meta.token_endpoint, issuer)) {
    // The page may only connect to the issuer's origin (Content-Security-Policy).
    throw new SignInError("The sign-in provider's token endpoint is on another origin than its issuer; the page cannot use it.");
  }
  return meta;
}

// Session holds the signed-in user's tokens, in memory.
export class Session {
  constructor(cfg, meta) {
    this.cfg = cfg;
    this.meta = meta;
    this.access = "";
    this.refresh = "";
    this.expiresAt = 0; // ms; 0: unknown
    this.renewAt = 0;
    this.obtainedAt = 0;
    this.renewing = null;
    // auto: renewal may navigate to the provider by itself. Off after a failed sign-in,
    // so that a provider that keeps refusing does not make the page loop.
    this.auto = true;
    // draft returns what the user was typing, kept across a sign-in's redirect.
    this.draft = () => "";
  }

  get signedIn() {
    return this.access !== "";
  }

  // redirectURI is the page's own address: the provider sends the user back here.
  redirectURI() {
    return location.origin + location.pathname;
  }

  // token returns the access token, renewed first when it is about to expire.
  async token() {
    if (this.access && this.renewAt && Date.now() >= this.renewAt) await this.renew();
    return this.access;
  }

  // refused handles Baton's 401 for the current token: it resolves true when there is a new
  // token to try, false when the refusal should be shown (a token just issued was refused:
  // signing in again would give the same). Signing in again navigates away.
  async refused() {
    if (!this.refresh && Date.now() - this.obtainedAt < FRESH_MS) return false;
    const before = this.access;
    await this.renew();
    return this.access !== "" && this.access !== before;
  }

  // renew uses the refresh token when there is one, else signs in again; concurrent
  // callers share one renewal (a refresh token may be used once: the provider rotates it).
  renew() {
    if (!this.renewing) {
      this.renewing = this.doRenew().finally(() => {
        this.renewing = null;
      });
    }
    return this.renewing;
  }

  async doRenew() {
    if (this.refresh) {
      try {
        await this.grant({ grant_type: "refresh_token", refresh_token: this.refresh });
        return;
      } catch (_) {
        this.refresh = ""; // refused or expired: sign in again below
      }
    }
    if (this.auto) await this.signIn();
  }

  // grant asks the token endpoint for tokens (RFC 6749 §4.1.3, §6) and keeps them.
  async grant(params) {
    const body = new URLSearchParams({ ...params, client_id: this.cfg.clientId });
    let resp;
    try {
      resp = await fetch(this.meta.token_endpoint, {
        method: "POST",
        headers: { "Content-Type": "application/x-www-form-urlencoded", Accept: "application/json" },
        body,
        credentials: "omit",
      });
    } catch (e) {
      throw new SignInError("Cannot reach the sign-in provider.", String((e && e.message) || e));
    }
    let tok = null;
    try {
      tok = await resp.json();
    } catch (_) {
      tok = null;
    }
    if (!resp.ok || !tok || typeof tok.access_token !== "string" || !tok.access_token) {
      const code = tok && typeof tok.error === "string" ? tok.error : "HTTP " + resp.status;
      throw new SignInError("The sign-in provider did not issue a token.", code);
    }
    if (typeof tok.token_type !== "string" || tok.token_type.toLowerCase() !== "bearer") {
      throw new SignInError("The sign-in provider issued a token this page cannot send.", String(tok.token_type));
    }
    const now = Date.now();
    this.access = tok.access_token;
    // A refresh response without a refresh token keeps the previous one (RFC 6749 §6).
    if (typeof tok.refresh_token === "string" && tok.refresh_token) this.refresh = tok.refresh_token;
    else if (params.grant_type !== "refresh_token") this.refresh = "";
    const life = Number(tok.expires_in) * 1000;
    this.expiresAt = life > 0 ? now + life : 0;
    this.renewAt = life > 0 ? now + life - Math.min(RENEW_BEFORE_MS, life / 4) : 0;
    this.obtainedAt = now;
  }

  // signIn sends the browser to the provider's authorization endpoint; it never resolves
  // (the page is left). The verifier, the state and the thread shown wait in sessionStorage.
  async signIn() {
    const verifier = randomString(32);
    const state = randomString(16);
    const challenge = await codeChallenge(verifier);
    let draft = "";
    try {
      draft = String(this.draft() || "").slice(0, 100000);
    } catch (_) {
      draft = "";
    }
    const pending = { state, verifier, hash: location.hash, draft, at: Date.now(), issuer: this.cfg.issuer, clientId: this.cfg.clientId };
    sessionStorage.setItem(PENDING, JSON.stringify(pending));
    const u = new URL(this.meta.authorization_endpoint);
    u.searchParams.set("response_type", "code");
    u.searchParams.set("client_id", this.cfg.clientId);
    u.searchParams.set("redirect_uri", this.redirectURI());
    u.searchParams.set("scope", "openid");
    u.searchParams.set("state", state);
    u.searchParams.set("code_challenge", challenge);
    u.searchParams.set("code_challenge_method", "S256");
    location.assign(u.href);
    return new Promise(() => {});
  }
}

// takePending returns and removes the sign-in this tab started; null when there is none.
function takePending() {
  let p = null;
  try {
    p = JSON.parse(sessionStorage.getItem(PENDING) || "null");
  } catch (_) {
    p = null;
  }
  try {
    sessionStorage.removeItem(PENDING);
  } catch (_) {
    // storage disabled: nothing was kept
  }
  return p && typeof p === "object" ? p : null;
}

// startSignIn signs the page in. It resolves with {session, draft} once the page holds a
// token (draft: what the user was typing when the page left for the provider), with
// {session, draft, error} when the provider's answer was refused (the page then shows the
// error and offers to sign in again: session.signIn()), and never when it has sent the
// browser to the provider. A provider that cannot be used at all rejects with SignInError.
export async function startSignIn(cfg) {
  if (!window.isSecureContext || !crypto.subtle) {
    throw new SignInError("Signing in needs the page on https (or on localhost).");
  }
  const meta = await discover(cfg.issuer);
  const session = new Session(cfg, meta);
  const q = new URLSearchParams(location.search);
  if (!q.has("state") || !(q.has("code") || q.has("error"))) {
    await session.signIn();
  }
  // The provider sent the browser back: whatever follows, the code leaves the address bar
  // and the history, and the pending sign-in is used up.
  const pending = takePending();
  history.replaceState(null, "", location.pathname + ((pending && pending.hash) || ""));
  session.auto = false;
  const draft = pending && typeof pending.draft === "string" ? pending.draft : "";
  try {
    if (!pending || typeof pending.state !== "string" || pending.state !== q.get("state")) {
      throw new SignInError("This sign-in answer was not asked for by this page (its state does not match).", "state mismatch");
    }
    if (pending.issuer !== cfg.issuer || pending.clientId !== cfg.clientId || Date.now() - Number(pending.at) > PENDING_MAX_AGE_MS) {
      throw new SignInError("This sign-in answer is out of date.", "stale");
    }
    // RFC 9207: the answer names its issuer, so another provider's answer is refused.
    const iss = q.get("iss");
    if (iss !== null ? iss !== cfg.issuer : meta.authorization_response_iss_parameter_supported === true) {
      throw new SignInError("This sign-in answer comes from another provider.", "issuer mismatch");
    }
    if (q.has("error")) {
      throw new SignInError("The sign-in provider did not sign you in.", q.get("error"));
    }
    await session.grant({ grant_type: "authorization_code", code: q.get("code"), redirect_uri: session.redirectURI(), code_verifier: pending.verifier });
  } catch (e) {
    if (!(e instanceof SignInError)) throw e;
    return { session, draft, error: e };
  }
  session.auto = true;
  return { session, draft };
}
