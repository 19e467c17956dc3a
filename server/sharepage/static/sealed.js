// The sealed format's reading side (cli/sealed/FORMAT.md), in WebCrypto:
// key derivation (§2), streams and their ranges (§4), the wrapped secret
// (§9.2) and the link's secret in the URL's fragment (§9.1).

export const CHUNK = 65536;
export const PIECE = CHUNK + 16;
export const HEADER = 25;

const subtle = crypto.subtle;
const utf8 = new TextEncoder();
const NO_SALT = new Uint8Array(0);

// linkSecret reads the fragment: exactly 43 characters of url base64 whose
// padding bits are zero, or null.
export function linkSecret(fragment) {
  if (!/^[A-Za-z0-9_-]{43}$/.test(fragment) || !"AEIMQUYcgkosw048".includes(fragment[42])) {
    return null;
  }
  const bin = atob(fragment.replaceAll("-", "+").replaceAll("_", "/") + "=");
  return Uint8Array.from(bin, (c) => c.charCodeAt(0));
}

// urlKey reads a 32-byte key written in url base64 (a share index's
// asset_key).
export function urlKey(text) {
  const k = typeof text === "string" ? linkSecret(text) : null;
  if (!k) {
    throw new Error("a key in the share index is malformed");
  }
  return k;
}

// hkdf is HKDF-SHA256 with a 32-byte output; an empty salt is RFC 5869's
// zero salt.
export async function hkdf(ikm, salt, info) {
  const k = await subtle.importKey("raw", ikm, "HKDF", false, ["deriveBits"]);
  const bits = await subtle.deriveBits({ name: "HKDF", hash: "SHA-256", salt: salt || NO_SALT, info: utf8.encode(info) }, k, 256);
  return new Uint8Array(bits);
}

// roleKey is the blob key of an asset's role (§3.4).
export const roleKey = (assetKey, role) => hkdf(assetKey, null, `sealbox/v1/role:${role}`);

// indexKey is the blob key of a link's share index (§9.3).
export const indexKey = (linkKey) => hkdf(linkKey, null, "sealbox/v1/share:index");

function aesKey(raw) {
  return subtle.importKey("raw", raw, "AES-GCM", false, ["decrypt"]);
}

// checkHeader refuses a stream header in the order §11 gives.
export function checkHeader(h) {
  if (h.length < HEADER || String.fromCharCode(...h.subarray(0, 4)) !== "SBXS") {
    throw new Error("not a sealed stream");
  }
  if (h[4] !== 1) {
    throw new Error(`stream format version ${h[4]} is not supported (this page reads version 1)`);
  }
  if (h[5] !== 0 || h[6] !== 1 || h[7] !== 0 || h[8] !== 0) {
    throw new Error("a sealed stream with another chunk size");
  }
}

// streamKey is the AES key of the stream whose 25-byte header is given.
export async function streamKey(blobKey, header) {
  checkHeader(header);
  return aesKey(await hkdf(blobKey, header.subarray(0, HEADER), "sealbox/v1/stream"));
}

// chunkCount is the number of chunks of a plaintext of size bytes.
export const chunkCount = (size) => Math.max(1, Math.ceil(size / CHUNK));

// sealedSize is the size of the stream of a plaintext of size bytes.
export const sealedSize = (size) => HEADER + size + 16 * chunkCount(size);

// openChunk opens chunk i of a stream, the last one when last is true.
export async function openChunk(key, i, last, piece) {
  const iv = new Uint8Array(12);
  for (let j = 10, x = i; j >= 0 && x > 0; j--, x = Math.floor(x / 256)) {
    iv[j] = x % 256;
  }
  iv[11] = last ? 1 : 0;
  return new Uint8Array(await subtle.decrypt({ name: "AES-GCM", iv }, key, piece));
}

// openStream opens a whole stream held in memory.
export async function openStream(blobKey, b) {
  const key = await streamKey(blobKey, b);
  const body = b.length - HEADER;
  const n = Math.max(1, Math.ceil(body / PIECE));
  const rest = body - (n - 1) * PIECE;
  if (rest < 16 || (n > 1 && rest === 16)) {
    throw new Error("a truncated sealed stream");
  }
  const chunks = [];
  for (let i = 0; i < n; i++) {
    const start = HEADER + i * PIECE;
    chunks.push(openChunk(key, i, i === n - 1, b.subarray(start, Math.min(start + PIECE, b.length))));
  }
  const out = new Uint8Array(body - 16 * n);
  (await Promise.all(chunks)).forEach((p, i) => out.set(p, i * CHUNK));
  return out;
}

// openJSON opens a sealed JSON document (metadata §6, share index §9.3):
// UTF-8, padded with spaces, which JSON.parse reads as they are.
export async function openJSON(blobKey, b) {
  const text = new TextDecoder("utf-8", { fatal: true }).decode(await openStream(blobKey, b));
  return JSON.parse(text);
}

// unwrapLinkKey opens a wrapped secret (§9.2) with a passphrase. A wrong
// passphrase throws WrongPassphrase.
export class WrongPassphrase extends Error {}

export async function unwrapLinkKey(w, secret, passphrase) {
  if (w.length !== 86 || String.fromCharCode(...w.subarray(0, 4)) !== "SBXP") {
    throw new Error("the link's wrapped secret is malformed");
  }
  if (w[4] !== 1) {
    throw new Error(`wrapped secret format version ${w[4]} is not supported (this page reads version 1)`);
  }
  const iterations = new DataView(w.buffer, w.byteOffset).getUint32(6);
  if (w[5] !== 1 || iterations < 1 || iterations > 10_000_000) {
    throw new Error("the link's wrapped secret has parameters this page refuses");
  }
  const pw = await subtle.importKey("raw", utf8.encode(passphrase), "PBKDF2", false, ["deriveBits"]);
  const bits = await subtle.deriveBits({ name: "PBKDF2", hash: "SHA-256", salt: w.slice(10, 26), iterations }, pw, 256);
  const kek = await aesKey(await hkdf(new Uint8Array(bits), secret, "sealbox/v1/share:passphrase-kek"));
  try {
    return new Uint8Array(await subtle.decrypt({ name: "AES-GCM", iv: w.slice(26, 38), additionalData: w.slice(0, 26) }, kek, w.slice(38)));
  } catch {
    throw new WrongPassphrase();
  }
}
