-- Claim-and-delete: a job is taken and removed in one statement, so it is one
-- transaction from the queue's point of view (the work would run inside it).

-- name: uninstall
DROP TABLE IF EXISTS skip_locked_delete_jobs;

-- name: install
CREATE TABLE skip_locked_delete_jobs (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    payload     jsonb NOT NULL,
    enqueued_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- name: enqueue_many
INSERT INTO skip_locked_delete_jobs (payload)
SELECT p FROM unnest($1::jsonb[]) AS p
RETURNING id;

-- name: settle
ANALYZE skip_locked_delete_jobs;

-- name: dequeue
WITH picked AS (
    SELECT id FROM skip_locked_delete_jobs
    ORDER BY id
    FOR UPDATE SKIP LOCKED
    LIMIT $1
)
DELETE FROM skip_locked_delete_jobs j
USING picked
WHERE j.id = picked.id
RETURNING j.id, j.payload;

-- name: present
-- Crash accounting (the durability study): which of the ids a client saw acknowledged
-- survived a crash, and which acked ones came back undone (a claimed job is deleted).
SELECT id FROM skip_locked_delete_jobs WHERE id = ANY($1::bigint[]);

-- name: undone
SELECT id FROM skip_locked_delete_jobs WHERE id = ANY($1::bigint[]);
