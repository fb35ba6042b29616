'use strict'
// The adapter's side of benchlib's JSON-lines worker contract v2 (../CONTRACT.md):
// one writer for stdout, `handled` events batched, every request served concurrently.
const readline = require('node:readline')
const { setTimeout: waitMs } = require('node:timers/promises')

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

// BENCH_HANDLED_SYNC=1 (CONTRACT.md): each job's event written before its handler returns, so a
// SIGKILL never takes away the report of a job the system went on to complete.
const SYNC = process.env.BENCH_HANDLED_SYNC === '1'

// The handler ran for seq: written within a few ms, with whatever else ran meanwhile (at once with SYNC).
function handled (seq, t = now()) {
  pending.push(`[${JSON.stringify(seq ?? null)},${t}]`)
  if (SYNC) flushHandled()
  else flushTimer ??= setTimeout(flushHandled, 2)
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
    if (system.refusal) throw new Error(system.refusal) // BENCH_SETTINGS asked for what we cannot run
    const op = system.ops[request.op]
    if (!op) throw new Error(`unknown op ${JSON.stringify(request.op)}`)
    line({ id: request.id, ok: true, ...(await op(request)) })
  } catch (err) {
    line({ id: request.id, ok: false, error: oneLine(err?.message ?? err) })
  }
}

// BENCH_SETTINGS (../CONTRACT.md): a JSON object that overrides throughput-bounding
// settings by the names the hello reports. `accepted` maps each name we can override to
// { value: its default, range: the accepted values in words, ok: value => boolean };
// `check(values)` lists what the library refuses of a combination. Returns `values`
// (every accepted name, overridden or not) and `refusal`: null when all is well, else one
// line naming each key we do not know or whose value is out of range (and the defaults).
function readSettings (accepted, check = () => [], text = process.env.BENCH_SETTINGS) {
  const defaults = Object.fromEntries(Object.entries(accepted).map(([name, { value }]) => [name, value]))
  const values = { ...defaults }
  if (!text?.trim()) return { values, refusal: null }
  let requested
  try {
    requested = JSON.parse(text)
  } catch (err) {
    return { values, refusal: oneLine(`BENCH_SETTINGS is not JSON: ${err.message}`) }
  }
  if (requested === null || typeof requested !== 'object' || Array.isArray(requested)) {
    return { values, refusal: 'BENCH_SETTINGS must be a JSON object of setting: value' }
  }
  const known = Object.entries(accepted).map(([name, { range }]) => `${name} (${range})`).join(', ')
  const problems = []
  for (const [name, value] of Object.entries(requested)) {
    const setting = Object.hasOwn(accepted, name) ? accepted[name] : null
    if (!setting) problems.push(`unknown key ${JSON.stringify(name)}; this adapter overrides only ${known}`)
    else if (!setting.ok(value)) problems.push(`${name} must be ${setting.range}, got ${JSON.stringify(value)}`)
    else values[name] = value
  }
  if (problems.length === 0) problems.push(...check(values))
  if (problems.length === 0) return { values, refusal: null }
  return { values: defaults, refusal: oneLine(`BENCH_SETTINGS: ${problems.join('; ')}`) } // nothing applied
}

// Application code holding every connection of a node-postgres pool it shares with the
// workers (CONTRACT.md's hold_pool, the chaos study's pool_exhaustion fault): one connect()
// per connection the pool may open, all queued at once, so each client the workers give back
// comes to us and their next connect() waits behind ours. A queued connect() cannot be
// withdrawn: one answered after the release gives its client straight back.
function poolHold (pool) {
  const held = []
  let holding = true
  const size = pool.options.max
  const waiting = Array.from({ length: size }, () => pool.connect().then(
    client => { if (holding) held.push(client); else client.release() },
    () => {}))
  return {
    async take (withinS) {
      await Promise.race([Promise.allSettled(waiting), new Promise(resolve => setTimeout(resolve, withinS * 1000))])
      return { held: held.length, pool_max: size }
    },
    release () {
      holding = false
      const n = held.length
      for (const client of held.splice(0)) client.release()
      return n
    }
  }
}

// The contract's hold_pool and release_pool for an adapter whose running workers' pool is
// `current()` (null while none run), and `release` for its stop, which gives the pool back first.
function poolOps (current) {
  let hold = null
  const release = () => {
    const n = hold ? hold.release() : 0
    hold = null
    return n
  }
  const holdPool = async ({ within_s: withinS = 2 }) => {
    const pool = current()
    if (!pool || hold) throw new Error('hold_pool needs running workers and a pool not already held')
    hold = poolHold(pool)
    return await hold.take(withinS)
  }
  return { release, ops: { hold_pool: holdPool, release_pool: async () => ({ held: release() }) } }
}

// Runs the adapter: hello first, then requests until stdin closes, then stop and exit 0.
// With a `refusal` (bad BENCH_SETTINGS) it still says hello, then answers every request
// with that one-line error.
function serve (system) {
  console.log = console.info = console.debug = console.warn = console.error // stdout is the wire
  // Node's default for an unhandled rejection is to end the process: a library's worker process
  // ends as it would in an application that did not add a handler, saying why first (the
  // harness's supervisor, like a deployment's, starts it again)
  process.on('unhandledRejection', err => {
    error(`unhandled rejection: ${err?.message ?? err}: exiting, as Node does by default`)
    flushHandled()
    process.exit(1)
  })
  line({ hello: system.hello() })
  if (system.refusal) process.stderr.write(`${system.refusal}\n`)
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

// The `job_work` of a work request (../CONTRACT.md): what each job's handler does before
// it reports the job. `run(jobs)`: a wait of `ms` for the jobs a handler got together,
// or `ms` of busy CPU per job; null (no job_work): nothing, the no-op handler of before.
// `settings`: the work in force, for the work reply. A bad job_work throws one line.
function jobWork (given) {
  if (given == null) return { run: null, settings: {} }
  const { kind, ms } = given
  if (!['wait', 'cpu'].includes(kind) || !(ms > 0 && ms <= 1000)) {
    throw new Error(`job_work ${JSON.stringify(given)}: kind wait or cpu, ms above 0 and at most 1000`)
  }
  const spin = jobs => { for (const end = performance.now() + ms * jobs; performance.now() < end;); }
  return { run: kind === 'wait' ? () => waitMs(ms) : spin, settings: { [`job_${kind}_ms`]: ms } }
}

module.exports = { serve, readSettings, handled, enqueued, error, now, poolOps, jobWork }
