-- The same lifecycle as skip_locked on one SQLite file. SQLite serialises writers,
-- so a dequeue takes the write lock up front (BEGIN IMMEDIATE): a deferred
-- transaction that read first could fail with SQLITE_BUSY_SNAPSHOT instead of waiting.

-- name: uninstall
DROP TABLE IF EXISTS jobs;

-- name: install
CREATE TABLE jobs (
    id          INTEGER PRIMARY KEY,
    state       TEXT NOT NULL DEFAULT 'ready' CHECK (state IN ('ready', 'claimed', 'done')),
    payload     TEXT NOT NULL,
    enqueued_at REAL NOT NULL DEFAULT (((julianday('now') - 2440587.5) * 86400.0)),
    claimed_at  REAL,
    done_at     REAL
);
CREATE INDEX jobs_ready ON jobs (id) WHERE state = 'ready';

-- name: enqueue_many
INSERT INTO jobs (payload) SELECT value FROM json_each(?) RETURNING id;

-- name: settle
ANALYZE;
PRAGMA wal_checkpoint(TRUNCATE);

-- name: dequeue
-- INDEXED BY: after ANALYZE on a freshly filled queue (every row 'ready') SQLite's
-- planner prefers a rowid scan to the partial index; as the drain proceeds, each
-- dequeue then walks past every claimed row and the drain turns quadratic.
UPDATE jobs
SET state = 'claimed', claimed_at = ((julianday('now') - 2440587.5) * 86400.0)
WHERE id IN (SELECT id FROM jobs INDEXED BY jobs_ready WHERE state = 'ready' ORDER BY id LIMIT ?)
RETURNING id, payload;

-- name: ack
UPDATE jobs
SET state = 'done', done_at = ((julianday('now') - 2440587.5) * 86400.0)
WHERE id IN (SELECT value FROM json_each(?)) AND state = 'claimed';
