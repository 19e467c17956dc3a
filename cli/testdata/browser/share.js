// The page of TestShareLinksInABrowser, run by headless Chromium from an
// origin other than sealbox's (another port). It reads a live share link as
// a viewer's page would, and reports what it saw to the test after each
// phase (POST /report/<phase>, same origin); the test's answer is the
// configuration of the next phase, once the test has acted (revoked the
// link, restarted sealbox with --cors-origin).
'use strict';

const hex = (buf) => Array.from(new Uint8Array(buf), (b) => b.toString(16).padStart(2, '0')).join('');
const sha256 = async (buf) => hex(await crypto.subtle.digest('SHA-256', buf));

// read fetches url and describes the answer as the page sees it; a request
// the browser refuses (CORS) or cannot make is {error}.
async function read(url, init) {
  try {
    const r = await fetch(url, init);
    const body = await r.arrayBuffer();
    const h = (name) => r.headers.get(name);
    return {
      status: r.status, length: body.byteLength, sha256: await sha256(body),
      etag: h('ETag'), contentRange: h('Content-Range'), contentLength: h('Content-Length'),
      acceptRanges: h('Accept-Ranges'), cacheControl: h('Cache-Control'), lastModified: h('Last-Modified'),
      text: /json/.test(h('Content-Type')) ? new TextDecoder().decode(body) : '',
    };
  } catch (e) {
    return { error: String(e) };
  }
}

async function report(phase, seen) {
  const r = await fetch('/report/' + phase, { method: 'POST', body: JSON.stringify(seen) });
  return r.json();
}

async function main() {
  let cfg = JSON.parse(document.getElementById('config').textContent);
  const link = cfg.shares + '/s/' + cfg.link;
  const big = link + '/blob/' + cfg.big;
  const small = link + '/blob/' + cfg.small;
  const albums = { headers: { Authorization: 'Bearer ' + cfg.token } };

  let seen = {};
  seen.metadata = await read(link);
  // A plain Range is CORS-safelisted: no preflight.
  seen.range = await read(big, { headers: { Range: cfg.range } });
  seen.whole = await read(big);
  seen.wholeMatches = seen.whole.sha256 === cfg.big;
  // If-None-Match is not safelisted: this one is preflighted. A page sees
  // the 304 itself only when it bypasses its cache and sends the validator.
  seen.revalidated = await read(big, { cache: 'no-store', headers: { 'If-None-Match': seen.whole.etag } });
  // Into the HTTP cache, just before the link is revoked.
  seen.small = await read(small);
  seen.api = await read(cfg.api + '/v1/albums', albums);
  cfg = await report('live', seen);

  seen = {};
  seen.small = await read(small);
  seen.metadata = await read(link);
  cfg = await report('revoked', seen);

  seen = {};
  seen.api = await read(cfg.api + '/v1/albums', albums);
  await report('api', seen);
  document.body.textContent = 'done';
}

main().catch((e) => report('failed', { error: String(e) }));
