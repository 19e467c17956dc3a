// Uploads a file to sealbox with the real tus-js-client, the way a client on
// a flaky uplink would. The test routes it through a proxy that drops the
// connection after about half the bytes; this first attempt runs without
// retries, so it fails there. A new Upload then resumes from the stored
// upload URL. Run by TestTusJSClientInterop:
//
//   node upload.js <endpoint> <access token> <file> <content address>
//
// Prints one JSON line: {"url": ..., "resumedFrom": ...}.
'use strict'

const fs = require('node:fs')
const tus = require('tus-js-client')

const [endpoint, token, file, hash] = process.argv.slice(2)
const data = fs.readFileSync(file)
const headers = { Authorization: `Bearer ${token}` }
// 409 (offset moved) and 423 (the server is still reading the cut request)
// are retried by tus-js-client after these delays.
const retryDelays = [100, 250, 500, 1000, 2000]

function firstAttempt () {
  return new Promise((resolve, reject) => {
    const upload = new tus.Upload(data, {
      endpoint,
      headers,
      metadata: { hash },
      retryDelays: null,
      onError: (err) => {
        if (upload.url == null) reject(err)
        else resolve(upload.url)
      },
      onSuccess: () => reject(new Error('the first attempt was never cut off'))
    })
    upload.start()
  })
}

// acknowledged polls HEAD until the server has recorded the bytes of the cut
// request (it does so when it notices the connection is gone).
async function acknowledged (url) {
  const deadline = Date.now() + 10000
  for (;;) {
    const res = await fetch(url, { method: 'HEAD', headers: { ...headers, 'Tus-Resumable': '1.0.0' } })
    if (res.status !== 200) throw new Error(`HEAD answered ${res.status}`)
    const offset = Number.parseInt(res.headers.get('Upload-Offset'), 10)
    if (offset > 0 || Date.now() > deadline) return offset
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

function resume (url) {
  return new Promise((resolve, reject) => {
    // No endpoint: if the upload URL were refused, tus-js-client would
    // otherwise quietly start over instead of resuming.
    const upload = new tus.Upload(data, {
      uploadUrl: url,
      headers,
      metadata: { hash },
      retryDelays,
      onError: reject,
      onSuccess: () => resolve()
    })
    upload.start()
  })
}

async function main () {
  const url = await firstAttempt()
  const resumedFrom = await acknowledged(url)
  await resume(url)
  console.log(JSON.stringify({ url, resumedFrom }))
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
