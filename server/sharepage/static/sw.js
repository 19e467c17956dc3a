// The share page's service worker: it answers the page's downloads and its
// video's range requests with plaintext it decrypts as the sealed bytes
// stream in, so no original and no archive is ever whole in memory and the
// server only ever sends sealed bytes. The page hands it what to serve
// (a message naming a token, the blobs and their keys); the keys stay in
// this worker's memory and in no request.

import { CHUNK, HEADER, PIECE, chunkCount, sealedSize, streamKey, openChunk } from "./sealed.js";
import { get } from "./reads.js";

const plans = new Map();
// A video is answered at most this many bytes at a time: the player asks
// for the rest, and a seek reads only what is around it.
const WINDOW = 4 << 20;
const utf8 = new TextEncoder();

self.addEventListener("install", () => self.skipWaiting());
self.addEventListener("activate", (e) => e.waitUntil(self.clients.claim()));
self.addEventListener("message", (e) => {
  plans.set(e.data.token, e.data);
  e.ports[0].postMessage("ok");
});
self.addEventListener("fetch", (e) => {
  const url = new URL(e.request.url);
  const m = /\/(file|zip|video)\/([0-9a-f]{32})$/.exec(url.pathname);
  const plan = m && url.origin === location.origin ? plans.get(m[2]) : undefined;
  if (plan && plan.kind === m[1]) {
    e.respondWith(answer(plan, e.request));
  }
});

async function answer(plan, req) {
  if (plan.kind === "video" && req.headers.has("Range")) {
    return range(plan, req.headers.get("Range"));
  }
  const headers = { "Content-Type": plan.type, "Cache-Control": "no-store", "X-Content-Type-Options": "nosniff" };
  if (plan.kind === "video") {
    headers["Accept-Ranges"] = "bytes";
  } else {
    headers["Content-Disposition"] = disposition(plan.name);
  }
  const body = plan.kind === "zip" ? zip(plan) : plaintext(plan.base, plan.entries[0]);
  return new Response(stream(body), { headers });
}

function disposition(name) {
  const ascii = name.replace(/[^\x20-\x7e]|["\\]/g, "_");
  const encoded = encodeURIComponent(name).replace(/['()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
  return `attachment; filename="${ascii}"; filename*=UTF-8''${encoded}`;
}

// stream pulls a generator's pieces as the reader takes them, so a slow
// disk slows the reads from the server instead of filling memory.
function stream(gen) {
  return new ReadableStream(
    {
      async pull(c) {
        try {
          const { done, value } = await gen.next();
          if (done) {
            c.close();
          } else {
            c.enqueue(value);
          }
        } catch (err) {
          c.error(err);
        }
      },
      cancel: () => gen.return(),
    },
    { highWaterMark: 1 },
  );
}

// plaintext yields an original's plaintext chunk by chunk, each once it is
// authenticated, reading its sealed blob as it arrives.
async function* plaintext(base, e) {
  const r = await get(`${base}/blob/${e.hash}`);
  const n = chunkCount(e.size);
  const total = sealedSize(e.size);
  const reader = r.body.getReader();
  const pieceLen = (i) => (i < n - 1 ? PIECE : total - HEADER - (n - 1) * PIECE);
  let buf = new Uint8Array(0);
  let got = 0;
  let key = null;
  let i = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (value) {
        got += value.length;
        if (got > total) {
          throw new Error(`${e.name}: the sealed blob is longer than its size`);
        }
        const joined = new Uint8Array(buf.length + value.length);
        joined.set(buf);
        joined.set(value, buf.length);
        buf = joined;
      }
      if (!key && buf.length >= HEADER) {
        key = await streamKey(e.key, buf);
        buf = buf.slice(HEADER);
      }
      while (key && i < n && buf.length >= pieceLen(i)) {
        const len = pieceLen(i);
        yield await openChunk(key, i, i === n - 1, buf.subarray(0, len));
        buf = buf.slice(len);
        i++;
      }
      if (done) {
        if (i !== n) {
          throw new Error(`${e.name}: the sealed blob is truncated`);
        }
        return;
      }
    }
  } finally {
    reader.cancel().catch(() => {});
  }
}

// range answers one range of a video's plaintext (at most WINDOW bytes)
// from the chunks that hold it (cli/sealed/FORMAT.md §4, random access).
async function range(plan, header) {
  const e = plan.entries[0];
  const size = e.size;
  const m = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  let a = 0;
  let b = size - 1;
  if (m && m[1] !== "") {
    a = Number(m[1]);
    if (m[2] !== "") {
      b = Math.min(Number(m[2]), size - 1);
    }
  } else if (m && m[2] !== "") {
    a = Math.max(0, size - Number(m[2]));
  }
  if (!m || a > b) {
    return new Response(null, { status: 416, headers: { "Content-Range": `bytes */${size}` } });
  }
  b = Math.min(b, a + WINDOW - 1);
  const n = chunkCount(size);
  const first = Math.floor(a / CHUNK);
  const last = Math.floor(b / CHUNK);
  plan.streamKey ??= get(`${plan.base}/blob/${e.hash}`, { headers: { Range: `bytes=0-${HEADER - 1}` } })
    .then((r) => r.arrayBuffer())
    .then((h) => streamKey(e.key, new Uint8Array(h)));
  const key = await plan.streamKey;
  const from = HEADER + first * PIECE;
  const to = Math.min(HEADER + (last + 1) * PIECE, sealedSize(size));
  const r = await get(`${plan.base}/blob/${e.hash}`, { headers: { Range: `bytes=${from}-${to - 1}` } });
  const sealed = new Uint8Array(await r.arrayBuffer());
  if (r.status !== 206 || sealed.length !== to - from) {
    throw new Error("the server did not answer the range asked for");
  }
  const chunks = [];
  for (let i = first; i <= last; i++) {
    const at = (i - first) * PIECE;
    chunks.push(openChunk(key, i, i === n - 1, sealed.subarray(at, at + PIECE)));
  }
  const plain = new Uint8Array((last - first + 1) * CHUNK);
  let at = 0;
  for (const c of await Promise.all(chunks)) {
    plain.set(c, at);
    at += c.length;
  }
  const body = plain.slice(a - first * CHUNK, b - first * CHUNK + 1);
  return new Response(body, {
    status: 206,
    headers: {
      "Content-Type": plan.type,
      "Content-Range": `bytes ${a}-${b}/${size}`,
      "Content-Length": String(body.length),
      "Accept-Ranges": "bytes",
      "Cache-Control": "no-store",
    },
  });
}

// zip yields a store-only ZIP archive (with ZIP64 records where a size or
// an offset needs them) of the plan's originals, each streamed and its
// CRC-32 computed as it passes, written after it in a data descriptor.
async function* zip(plan) {
  let offset = 0;
  const central = [];
  for (const e of plan.entries) {
    const name = utf8.encode(e.name);
    const big = e.size >= 0xffffffff;
    const [time, date] = dosTime(e.taken);
    const local = new Bytes(30 + name.length + (big ? 20 : 0))
      .u32(0x04034b50).u16(big ? 45 : 20).u16(0x0808).u16(0).u16(time).u16(date).u32(0)
      .u32(big ? 0xffffffff : 0).u32(big ? 0xffffffff : 0).u16(name.length).u16(big ? 20 : 0).raw(name);
    if (big) {
      local.u16(1).u16(16).u64(0).u64(0);
    }
    yield local.b;
    let crc = ~0;
    for await (const piece of plaintext(plan.base, e)) {
      crc = crc32(crc, piece);
      yield piece;
    }
    crc = ~crc >>> 0;
    const descriptor = big
      ? new Bytes(24).u32(0x08074b50).u32(crc).u64(e.size).u64(e.size)
      : new Bytes(16).u32(0x08074b50).u32(crc).u32(e.size).u32(e.size);
    yield descriptor.b;
    central.push({ name, big, time, date, crc, size: e.size, offset });
    offset += local.b.length + e.size + descriptor.b.length;
  }
  const start = offset;
  for (const c of central) {
    const far = c.offset >= 0xffffffff;
    const extra = (c.big ? 16 : 0) + (far ? 8 : 0);
    const h = new Bytes(46 + c.name.length + (extra ? 4 + extra : 0))
      .u32(0x02014b50).u16(45).u16(c.big || far ? 45 : 20).u16(0x0808).u16(0).u16(c.time).u16(c.date).u32(c.crc)
      .u32(c.big ? 0xffffffff : c.size).u32(c.big ? 0xffffffff : c.size).u16(c.name.length).u16(extra ? 4 + extra : 0)
      .u16(0).u16(0).u16(0).u32(0).u32(far ? 0xffffffff : c.offset).raw(c.name);
    if (extra) {
      h.u16(1).u16(extra);
      if (c.big) {
        h.u64(c.size).u64(c.size);
      }
      if (far) {
        h.u64(c.offset);
      }
    }
    yield h.b;
    offset += h.b.length;
  }
  const size = offset - start;
  const count = central.length;
  if (count >= 0xffff || start >= 0xffffffff || size >= 0xffffffff) {
    yield new Bytes(76)
      .u32(0x06064b50).u64(44).u16(45).u16(45).u32(0).u32(0).u64(count).u64(count).u64(size).u64(start)
      .u32(0x07064b50).u32(0).u64(offset).u32(1).b;
  }
  yield new Bytes(22)
    .u32(0x06054b50).u16(0).u16(0).u16(Math.min(count, 0xffff)).u16(Math.min(count, 0xffff))
    .u32(Math.min(size, 0xffffffff)).u32(Math.min(start, 0xffffffff)).u16(0).b;
}

// dosTime is a capture time (its wall-clock part) as MS-DOS time and date;
// 1980-01-01 when unknown or earlier.
function dosTime(local) {
  const m = /^(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)/.exec(local || "");
  if (!m || Number(m[1]) < 1980 || Number(m[1]) > 2107) {
    return [0, (1 << 5) | 1];
  }
  const [y, mo, d, h, mi, s] = m.slice(1).map(Number);
  return [(h << 11) | (mi << 5) | (s >> 1), ((y - 1980) << 9) | (mo << 5) | d];
}

class Bytes {
  constructor(n) {
    this.b = new Uint8Array(n);
    this.v = new DataView(this.b.buffer);
    this.p = 0;
  }
  u16(x) {
    this.v.setUint16(this.p, x, true);
    this.p += 2;
    return this;
  }
  u32(x) {
    this.v.setUint32(this.p, x >>> 0, true);
    this.p += 4;
    return this;
  }
  u64(x) {
    this.v.setBigUint64(this.p, BigInt(x), true);
    this.p += 8;
    return this;
  }
  raw(a) {
    this.b.set(a, this.p);
    this.p += a.length;
    return this;
  }
}

const crcTable = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) {
    c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  }
  return c >>> 0;
});

function crc32(crc, bytes) {
  for (let i = 0; i < bytes.length; i++) {
    crc = crcTable[(crc ^ bytes[i]) & 0xff] ^ (crc >>> 8);
  }
  return crc;
}
