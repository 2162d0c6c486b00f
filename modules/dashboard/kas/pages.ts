// The dashboard's two HTML documents: the login form (no script at all) and the shell the page's
// script renders into. Everything else comes from app.js and the event stream.

/** Scripts and styles from this origin only, no inline code, no framing. */
export const CONTENT_SECURITY_POLICY =
  "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; " +
  "form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

const head = (title: string) =>
  `<!doctype html><html lang="en"><head><meta charset="utf-8">` +
  `<meta name="viewport" content="width=device-width, initial-scale=1">` +
  `<title>${title}</title><link rel="icon" href="/favicon.svg" type="image/svg+xml">` +
  `<link rel="stylesheet" href="/app.css"></head>`;

/** The page's icon: three stacked nodes (served for /favicon.svg and the browsers' /favicon.ico). */
export const FAVICON =
  `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32">` +
  `<rect width="32" height="32" rx="6" fill="#24292f"/>` +
  `<rect x="7" y="6" width="18" height="5" rx="1.5" fill="#3fb950"/>` +
  `<rect x="7" y="13.5" width="18" height="5" rx="1.5" fill="#3fb950"/>` +
  `<rect x="7" y="21" width="18" height="5" rx="1.5" fill="#d29922"/></svg>`;

export function loginPage(error?: string): string {
  return (
    `${head("kas dashboard: log in")}<body><main class="login">` +
    `<h1>Cluster views</h1><form method="post" action="/login">` +
    `<label for="token">Dashboard token</label>` +
    `<input id="token" name="token" type="password" autocomplete="current-password" required autofocus>` +
    `<button type="submit">Log in</button>` +
    (error ? `<p class="error" role="alert">${escapeHtml(error)}</p>` : "") +
    `</form></main></body></html>`
  );
}

export function appPage(withLogout: boolean): string {
  return (
    `${head("kas dashboard")}<body data-logout="${withLogout}"><div id="app"></div>` +
    `<script type="module" src="/app.js"></script></body></html>`
  );
}

function escapeHtml(text: string): string {
  return text.replace(
    /[&<>"']/g,
    (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!,
  );
}
