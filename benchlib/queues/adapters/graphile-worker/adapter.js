'use strict'
// The graphile-worker adapter of benchlib's JSON-lines worker contract v2:
// graphile-worker's public API only (runMigrations, makeWorkerUtils().addJobs, run).
process.env.NO_LOG_SUCCESS ??= '1' // its documented switch: no log line built per completed job
const pg = require('pg')
const { run, runMigrations, makeWorkerUtils, Logger } = require('graphile-worker')
const { version } = require('graphile-worker/package.json')
const { serve, readSettings, handled, enqueued, error, poolOps, jobWork } = require('./wire')

const SCHEMA = 'graphile_worker'
const TASK = 'bench'
// graphile-worker's defaults, set explicitly so hello reports what actually runs;
// BENCH_SETTINGS may override these four. graphile-worker checks none of them: the
// ranges are Node's timers' (a delay past 2^31 - 1 ms fires after 1 ms), and a batch
// delay below 0 turns batching off (its main.js: `completeJobBatchDelay >= 0 ? batch(...)`).
const ms = (low, v) => Number.isInteger(v) && v >= low && v <= 2147483647
const batchDelay = {
  value: -1, // -1: off; 0 or more: completions (failures) within this many ms go as one query
  range: 'an integer: -1 (off) or 0 to 2147483647',
  ok: v => v === -1 || ms(0, v)
}
const { values: SETTINGS, refusal } = readSettings({
  // a fallback when a worker finds no job: LISTEN "jobs:insert" wakes idle workers at
  // once, and a busy worker (or a full local-queue fetch) fetches again without waiting
  poll_interval_ms: { value: 2000, range: 'an integer from 1 to 2147483647', ok: v => ms(1, v) },
  complete_job_batch_delay_ms: batchDelay, // preset.worker.completeJobBatchDelay
  fail_job_batch_delay_ms: batchDelay, // preset.worker.failJobBatchDelay
  // the pg.Pool passed as run()'s pgPool; null: max(10, concurrency + 2), its own advice
  pool_max_conns: { value: null, range: 'an integer from 1 to 262143', ok: v => Number.isInteger(v) && v >= 1 && v <= 262143 }
})
const POLL_INTERVAL_MS = SETTINGS.poll_interval_ms
const LOCK_EXPIRY_S = 4 * 3600 // a killed worker's locked jobs run again only after this

// Warnings and errors to stderr (kept for error messages); stdout is the wire.
const logger = new Logger(scope => (level, message) => {
  if (level === 'error' || level === 'warning') process.stderr.write(`${level} ${scope.label ?? ''}: ${message}\n`)
})
const DSN = process.env.BENCH_DSN
let utils = null // a promise of WorkerUtils (addJobs, over its own small pool)
let running = null // { runner, pool } while workers run

const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))

async function adminQuery (text) {
  const client = new pg.Client({ connectionString: DSN })
  await client.connect()
  try {
    return await client.query(text)
  } finally {
    await client.end()
  }
}

async function releaseUtils () {
  const done = await utils?.catch(() => null)
  utils = null
  await done?.release()
}

// A fresh WorkerUtils after every (un)install: its pool must not keep statements
// prepared against the schema just dropped. A promise, so concurrent requests share
// it; a failed one is forgotten, so the next request tries again.
function getUtils () {
  utils ??= makeWorkerUtils({ connectionString: DSN, schema: SCHEMA, logger })
    .catch(err => { utils = null; throw err })
  return utils
}

async function install () {
  await stop()
  await releaseUtils()
  await adminQuery(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`)
  await runMigrations({ connectionString: DSN, schema: SCHEMA, logger })
  return {}
}

async function uninstall () { // graphile-worker has no down migrations: its schema holds it all
  await stop()
  await releaseUtils()
  await adminQuery(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`)
  return {}
}

async function addJobs (payloads) {
  const jobs = await (await getUtils()).addJobs(payloads.map(payload => ({ identifier: TASK, payload })))
  return jobs.map(job => job.id) // bigint ids, as node-postgres gives them: strings
}

// run() with `concurrency` workers; a batch B turns on its localQueue of size B (the
// pool fetches and locks B jobs at once and serves its workers from them).
async function work ({ concurrency, batch, job_work: given }) {
  if (running) throw new Error('workers are already running')
  const perJob = jobWork(given)
  const task = perJob.run // the job's work (none: nothing), then report, return
    ? async payload => { await perJob.run(1); handled(payload?.seq) }
    : payload => { handled(payload?.seq) }
  const maxPoolSize = SETTINGS.pool_max_conns ?? Math.max(10, concurrency + 2) // graphile-worker's own advice
  const pool = new pg.Pool({ connectionString: DSN, max: maxPoolSize })
  // both handlers, as graphile-worker asks of a pool it is given: an idle or a
  // LISTENing client's error becomes an error event rather than a crash
  pool.on('error', err => error(`pg pool: ${err.message}`))
  pool.on('connect', client => client.on('error', err => error(`pg client: ${err.message}`)))
  const localQueueSize = batch >= 1 ? batch : -1
  const runner = await run({
    pgPool: pool,
    schema: SCHEMA,
    concurrency,
    pollInterval: POLL_INTERVAL_MS,
    noHandleSignals: true, // the harness ends us through stdin
    logger,
    taskList: { [TASK]: task },
    preset: {
      worker: {
        localQueue: { size: localQueueSize },
        completeJobBatchDelay: SETTINGS.complete_job_batch_delay_ms,
        failJobBatchDelay: SETTINGS.fail_job_batch_delay_ms
      }
    }
  }).catch(async err => { await pool.end(); throw err })
  runner.events.on('job:error', ({ job, error: err }) => error(`job failed: ${err?.message}`, job.payload?.seq ?? null))
  running = { runner, pool }
  // `continuous` changes nothing: run() keeps listening whether or not a producer runs.
  // No ceiling_jobs_per_s: none of its settings caps the rate (the poll interval only
  // paces a worker that found nothing)
  return {
    settings: { ...numbers(hello().settings), concurrency, local_queue_size: localQueueSize, pool_max_conns: pool.options.max, ...perJob.settings }
  }
}

// runner.stop() waits for running jobs, but graphile-worker does not await a job's
// completion (a DELETE); every such query has asked the pool for a client by the time
// stop resolves, so an idle pool, seen twice from a timer, means they all committed.
const pooled = poolOps(() => running?.pool) // application code holding the workers' pool (hold_pool)

async function stop () {
  pooled.release() // the workers' last queries need their connections
  if (running) await (running.stopped ??= stopWorkers(running)) // a stop and stdin's close may overlap
  running = null
  return {}
}

async function stopWorkers ({ runner, pool }) {
  await runner.stop()
  const busy = () => pool.waitingCount > 0 || pool.idleCount < pool.totalCount
  for (let quiet = 0; quiet < 2; quiet = busy() ? 0 : quiet + 1) await sleep(5)
  await pool.end()
}

const ops = {
  install,
  uninstall,
  enqueue: async ({ payloads }) => ({ ids: await addJobs(payloads) }),
  produce: async ({ payloads }) => {
    await addJobs(payloads)
    enqueued(payloads.map(p => p.seq))
    return {}
  },
  work,
  stop,
  ...pooled.ops
}

const hello = () => ({
  system: 'graphile-worker',
  version: `graphile-worker ${version}`,
  contract: 2,
  batch: true,
  settings: {
    concurrency: 'concurrency', // run() option: jobs one instance runs at once
    local_queue_size: 'batch (-1, off, when batch is null)',
    poll_interval_ms: POLL_INTERVAL_MS,
    listen_notify: true, // LISTEN "jobs:insert": new jobs wake idle workers without a poll
    // -1: each job's completion is its own DELETE, not awaited; 0 or more: batched
    complete_job_batch_delay_ms: SETTINGS.complete_job_batch_delay_ms,
    fail_job_batch_delay_ms: SETTINGS.fail_job_batch_delay_ms,
    lock_expiry_s: LOCK_EXPIRY_S,
    reset_locked_interval_s: '480-600', // how often expired locks are looked for
    local_queue_ttl_ms: 300000,
    pool_max_conns: SETTINGS.pool_max_conns ?? 'max(10, concurrency + 2)' // (BENCH_SETTINGS)
  },
  tables: [`${SCHEMA}._private_jobs`],
  control_tables: [`${SCHEMA}._private_job_queues`, `${SCHEMA}._private_tasks`,
    `${SCHEMA}._private_known_crontabs`, `${SCHEMA}.migrations`]
})

// the hello's settings that are numbers, for the work reply
const numbers = settings => Object.fromEntries(Object.entries(settings).filter(([, v]) => typeof v === 'number'))

serve({
  hello,
  ops,
  refusal,
  close: async () => {
    await stop()
    await releaseUtils()
  }
})
