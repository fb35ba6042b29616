'use strict'
// The pg-boss adapter of benchlib's JSON-lines worker contract v2: pg-boss's public
// API only (insert, work, offWork, stop), over a pg pool we hand it as its `db`.
const crypto = require('node:crypto')
const pg = require('pg')
const PgBoss = require('pg-boss')
const { version } = require('pg-boss/package.json')
const { serve, readSettings, handled, enqueued, error, now, poolOps, jobWork } = require('./wire')

const SCHEMA = 'pgboss'
const QUEUE = 'bench'
// pg-boss's defaults, set explicitly so hello reports what actually runs; BENCH_SETTINGS
// may override the polling interval (pg-boss 10.4.2 refuses less than 0.5 s: its
// POLICY.MIN_POLLING_INTERVAL_MS, src/attorney.js; Node's timers end at 2^31 - 1 ms), and the
// two settings that decide when a dead worker's active job runs again: its expiry, and how
// often the maintenance that expires it runs (src/attorney.js refuses either under 1 s or
// from 24 h, POLICY.MAX_EXPIRATION_HOURS).
const underADay = v => typeof v === 'number' && v >= 1 && v < 24 * 3600
const { values: SETTINGS, refusal } = readSettings({
  polling_interval_s: { // each work() loop sleeps this long minus its fetch's duration
    value: 2,
    range: 'a number from 0.5 to 2147483.647',
    ok: v => typeof v === 'number' && v >= 0.5 && v <= 2147483.647
  },
  expire_in_s: { // an active job older than this is set to retry (or failed) by maintenance
    value: 15 * 60,
    range: 'a number from 1 to under 86400 (24 h)',
    ok: underADay
  },
  maintenance_interval_s: { // each PgBoss with supervise runs expiry and archiving this often
    value: 120,
    range: 'a number from 1 to under 86400 (24 h)',
    ok: underADay
  },
  pool_max_conns: { // the workers' pg.Pool; null: max(10, concurrency + 2), ours
    value: null,
    range: 'an integer from 1 to 262143',
    ok: v => Number.isInteger(v) && v >= 1 && v <= 262143
  }
})
const POLLING_INTERVAL_S = SETTINGS.polling_interval_s
const CONFIG = { // given to every PgBoss: the producer's stamps each job it inserts
  schema: SCHEMA,
  // insert() gives each job this (plans.js insertJobs: the job's own expireInSeconds, else its
  // queue's, else this; our queue and jobs set none), so it reaches every job we enqueue
  expireInSeconds: SETTINGS.expire_in_s, // an active job is expired, then retried, after this
  retryLimit: 2,
  // workers' PgBoss only (the producer's has supervise: false); one run per interval across
  // them all (pgboss.version.maintained_on), and the first one interval after start
  maintenanceIntervalSeconds: SETTINGS.maintenance_interval_s, // expiry and archiving run this often
  archiveCompletedAfterSeconds: 12 * 3600 // completed jobs move to pgboss.archive after this
}
// v10 keeps each queue's jobs in a partition of pgboss.job named after its hash.
const PARTITION = 'j' + crypto.createHash('sha224').update(QUEUE).digest('hex')

// A db for PgBoss's `db` option that counts its queries in flight: pg-boss does not
// await a batch's complete(), so stop waits for this count to reach zero.
function trackedDb (pool) {
  const db = {
    inflight: 0,
    async executeSql (text, values) {
      db.inflight++
      try {
        return await pool.query(text, values)
      } finally {
        db.inflight--
      }
    }
  }
  return db
}

const poolFor = max => {
  const pool = new pg.Pool({ connectionString: process.env.BENCH_DSN, max, application_name: 'pgboss' })
  pool.on('error', err => error(`pg pool: ${err.message}`))
  return pool
}
const bossOn = (db, extra) => {
  const boss = new PgBoss({ db, ...CONFIG, ...extra })
  boss.on('error', err => error(`pg-boss: ${err.message}`))
  return boss
}
const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))

const adminPool = poolFor(4) // install, uninstall and the producer's inserts
let producer = null // a promise of a started PgBoss without maintenance, for insert()
let running = null // { boss, pool, db } while workers run

// A promise, so concurrent produce requests share one instance; a failed start is
// forgotten, so the next request tries again.
function startProducer () {
  producer ??= bossOn(trackedDb(adminPool), { supervise: false, schedule: false }).start()
    .catch(err => { producer = null; throw err })
  return producer
}

async function install () {
  await stop()
  await dropAll()
  const boss = await startProducer() // start() runs pg-boss's own migrations
  await boss.createQueue(QUEUE) // v10 needs the queue made before jobs are sent
  return {}
}

async function stopProducer () {
  const boss = await producer?.catch(() => null)
  producer = null
  await boss?.stop({ graceful: false, close: false })
}

async function dropAll () {
  await stopProducer()
  // pg-boss has no uninstall: its schema holds everything it made
  await adminPool.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`)
}

// insert() returns nothing in 10.x (its INSERT has no RETURNING), so the ids are
// made here and passed in, as its API allows.
async function insert (payloads) {
  const jobs = payloads.map(data => ({ id: crypto.randomUUID(), name: QUEUE, data }))
  await (await startProducer()).insert(jobs)
  return jobs.map(job => job.id)
}

// C work() loops, each fetching up to B jobs, then sleeping out its polling interval.
async function work ({ concurrency, batch, continuous, job_work: given }) {
  if (running) throw new Error('workers are already running')
  const perJob = jobWork(given)
  // one connection per loop, plus maintenance, unless BENCH_SETTINGS sizes it
  const pool = poolFor(SETTINGS.pool_max_conns ?? Math.max(10, concurrency + 2))
  const db = trackedDb(pool)
  const boss = await bossOn(db, { pollingIntervalSeconds: POLLING_INTERVAL_S }).start()
    .catch(async err => { await pool.end(); throw err })
  running = { boss, pool, db }
  const batchSize = batch || 1
  const noop = async fetched => { // the jobs' work (none: nothing), report, return: pg-boss then completes them
    if (perJob.run) await perJob.run(fetched.length)
    const t = now()
    for (const job of fetched) handled(job.data?.seq, t)
  }
  for (let i = 0; i < concurrency; i++) {
    await boss.work(QUEUE, { batchSize, pollingIntervalSeconds: POLLING_INTERVAL_S }, noop)
  }
  // `continuous` changes nothing: the loops poll whether or not a producer runs
  return { settings: { ...numbers(hello().settings), workers: concurrency, batch_size: batchSize, continuous: !!continuous,
    pool_max_conns: pool.options.max, ceiling_jobs_per_s: concurrency * batchSize / POLLING_INTERVAL_S, ...perJob.settings } }
}

// offWork ends each loop after its current fetch; every query a loop makes next
// (fetch, handler, complete) starts within the microtasks of the last one, so a
// count of zero seen from a timer, twice, means no loop is left and every handled
// job's complete() has committed.
const pooled = poolOps(() => running?.pool) // application code holding the workers' pool (hold_pool)

async function stop () {
  pooled.release() // the workers' last queries need their connections
  if (running) await (running.stopped ??= stopWorkers(running)) // a stop and stdin's close may overlap
  running = null
  return {}
}

async function stopWorkers ({ boss, pool, db }) {
  await boss.offWork(QUEUE)
  for (let quiet = 0; quiet < 2; quiet = db.inflight ? 0 : quiet + 1) await sleep(5)
  await boss.stop({ graceful: true, wait: true, close: false })
  while (db.inflight) await sleep(5)
  await pool.end()
}

const ops = {
  install,
  uninstall: async () => { await stop(); await dropAll(); return {} },
  enqueue: async ({ payloads }) => ({ ids: await insert(payloads) }),
  produce: async ({ payloads }) => {
    await insert(payloads)
    enqueued(payloads.map(p => p.seq))
    return {}
  },
  work,
  stop,
  ...pooled.ops
}

const hello = () => ({
  system: 'pg-boss',
  version: `pg-boss ${version}`,
  contract: 2,
  batch: true,
  settings: {
    polling_interval_s: POLLING_INTERVAL_S, // work() option pollingIntervalSeconds (>= 0.5; BENCH_SETTINGS)
    batch_size: 'batch', // work() option batchSize
    workers: 'concurrency', // one work() call each
    ceiling_jobs_per_s: 'concurrency * batch_size / polling_interval_s',
    expire_in_s: CONFIG.expireInSeconds, // also how long a killed worker's jobs stay active (BENCH_SETTINGS)
    retry_limit: CONFIG.retryLimit,
    maintenance_interval_s: CONFIG.maintenanceIntervalSeconds, // (BENCH_SETTINGS)
    archive_completed_after_s: CONFIG.archiveCompletedAfterSeconds,
    pool_max_conns: SETTINGS.pool_max_conns ?? 'max(10, concurrency + 2)', // (BENCH_SETTINGS)
    listen_notify: false
  },
  tables: [`${SCHEMA}.job`, `${SCHEMA}.${PARTITION}`, `${SCHEMA}.archive`],
  control_tables: [`${SCHEMA}.queue`, `${SCHEMA}.version`, `${SCHEMA}.schedule`, `${SCHEMA}.subscription`]
})

// the hello's settings that are numbers, for the work reply
const numbers = settings => Object.fromEntries(Object.entries(settings).filter(([, v]) => typeof v === 'number'))

serve({
  hello,
  ops,
  refusal,
  close: async () => {
    await stop()
    await stopProducer()
    await adminPool.end()
  }
})
