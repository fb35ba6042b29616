'use strict'
// The adapter's side of benchlib's JSON-lines worker contract v2 (../CONTRACT.md):
// one writer for stdout, `handled` events batched, every request served concurrently.
const readline = require('node:readline')

// One write call per line: Node writes to a pipe synchronously on Linux and this
// process has one thread, so lines never interleave.
const write = text => process.stdout.write(text + '\n')

// libuv's hrtime is CLOCK_MONOTONIC on Linux, the clock benchlib uses. Kept a
// BigInt and written as digits: nanoseconds of uptime outgrow a double's integers.
const now = () => process.hrtime.bigint()

const oneLine = text => String(text).split(/\r?\n/, 1)[0]

const pending = [] // "[seq,t]" pairs of `handled` not yet written
let flushTimer = null

function flushHandled () {
  clearTimeout(flushTimer)
  flushTimer = null
  if (pending.length) {
    write('{"handled":[' + pending.join(',') + ']}')
    pending.length = 0
  }
}

// The handler ran for seq: written within a few ms, with whatever else ran meanwhile.
function handled (seq, t = now()) {
  pending.push(`[${JSON.stringify(seq ?? null)},${t}]`)
  flushTimer ??= setTimeout(flushHandled, 2)
}

// A reply or event; the pending `handled` go first, so a `stop` reply follows the
// events of every job its workers handled.
function line (message) {
  flushHandled()
  write(JSON.stringify(message))
}

function enqueued (seqs, t = now()) {
  flushHandled()
  write('{"enqueued":[' + seqs.map(s => `[${JSON.stringify(s ?? null)},${t}]`).join(',') + ']}')
}

const error = (message, seq = null) => line({ error: oneLine(message), seq })

async function answer (system, text) {
  let request
  try {
    request = JSON.parse(text)
  } catch (err) {
    return error(`bad request: ${err.message}`)
  }
  try {
    const op = system.ops[request.op]
    if (!op) throw new Error(`unknown op ${JSON.stringify(request.op)}`)
    line({ id: request.id, ok: true, ...(await op(request)) })
  } catch (err) {
    line({ id: request.id, ok: false, error: oneLine(err?.message ?? err) })
  }
}

// Runs the adapter: hello first, then requests until stdin closes, then stop and exit 0.
function serve (system) {
  console.log = console.info = console.debug = console.warn = console.error // stdout is the wire
  process.on('unhandledRejection', err => error(`unhandled rejection: ${err?.message ?? err}`))
  line({ hello: system.hello() })
  const inflight = new Set()
  const input = readline.createInterface({ input: process.stdin, crlfDelay: Infinity })
  input.on('line', text => {
    if (!text.trim()) return
    const done = answer(system, text).finally(() => inflight.delete(done))
    inflight.add(done)
  })
  input.on('close', async () => { // the harness is done or gone
    await Promise.allSettled([...inflight])
    try {
      await system.close()
    } catch (err) {
      console.error('close:', err)
    }
    flushHandled()
    process.exit(0)
  })
}

module.exports = { serve, handled, enqueued, error, now }
