// Share reads (server/PROTOCOL.md §7): the page's requests to its own
// origin, without credentials or referrer. A rate limit (429) is waited out
// and the read sent again; a 404 (revoked, expired or unknown link, all
// alike) and a 400 (a mangled id) are errors of their own.

export class Unavailable extends Error {}
export class Incomplete extends Error {}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

export async function get(url, init = {}) {
  for (;;) {
    const r = await fetch(url, { credentials: "omit", referrerPolicy: "no-referrer", ...init });
    if (r.status === 429) {
      await sleep(1000 * Math.max(1, Number(r.headers.get("Retry-After")) || 1));
      continue;
    }
    if (r.status === 404) {
      throw new Unavailable("this link is no longer available");
    }
    if (r.status === 400) {
      throw new Incomplete("this link is incomplete");
    }
    if (!r.ok) {
      throw new Error(`the server answered ${r.status}`);
    }
    return r;
  }
}

// getBytes reads a whole answer.
export async function getBytes(url, init) {
  return new Uint8Array(await (await get(url, init)).arrayBuffer());
}
