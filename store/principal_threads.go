package store

// The threads each principal holds, counted as they are made and deleted, so that the cap of
// server.max_threads_per_principal is checked with one keyed read whatever the number of
// threads (a COUNT over the owner's threads grew with them: a run start of a principal with a
// million threads scanned a million index entries). Triggers keep the count, so every way a
// thread is made or deleted (a run start, ClaimThread, DeleteThread, the retention sweep)
// counts without code of its own; the backfill counts the threads of a database made before.

// schemaPrincipalThreadsSQLite is the SQLite migration (version 13).
const schemaPrincipalThreadsSQLite = `CREATE TABLE principal_threads (
		owner   TEXT PRIMARY KEY,
		threads INTEGER NOT NULL
	) WITHOUT ROWID;
	INSERT INTO principal_threads (owner, threads) SELECT owner, COUNT(*) FROM threads GROUP BY owner;
	CREATE TRIGGER threads_counted_insert AFTER INSERT ON threads BEGIN
		INSERT OR IGNORE INTO principal_threads (owner, threads) VALUES (NEW.owner, 0);
		UPDATE principal_threads SET threads = threads + 1 WHERE owner = NEW.owner;
	END;
	CREATE TRIGGER threads_counted_delete AFTER DELETE ON threads BEGIN
		UPDATE principal_threads SET threads = threads - 1 WHERE owner = OLD.owner;
	END;
	CREATE TRIGGER threads_counted_owner AFTER UPDATE OF owner ON threads WHEN NEW.owner <> OLD.owner BEGIN
		UPDATE principal_threads SET threads = threads - 1 WHERE owner = OLD.owner;
		INSERT OR IGNORE INTO principal_threads (owner, threads) VALUES (NEW.owner, 0);
		UPDATE principal_threads SET threads = threads + 1 WHERE owner = NEW.owner;
	END;`

// schemaPrincipalThreadsPostgres is the PostgreSQL migration (version 13). Inserts and
// deletes are counted once per statement, from its transition table: a row-level trigger
// would update the owner's count row once per thread, and many threads made in one
// transaction (a bulk load) would each make a new version of that one row, which the next
// update must walk to (quadratic). A new thread's count row is written under the owner's
// advisory lock that a capped start already takes (dialect.lockOwner), so it adds no
// contention of its own there. A thread changing owner (nothing does so today) is counted
// row by row: a trigger on a column list cannot have a transition table.
const schemaPrincipalThreadsPostgres = `CREATE TABLE principal_threads (
		owner   TEXT PRIMARY KEY,
		threads BIGINT NOT NULL
	);
	INSERT INTO principal_threads (owner, threads) SELECT owner, COUNT(*) FROM threads GROUP BY owner;
	CREATE FUNCTION baton_count_threads_insert() RETURNS trigger LANGUAGE plpgsql AS $fn$
	BEGIN
		INSERT INTO principal_threads (owner, threads)
			SELECT owner, COUNT(*) FROM new_threads GROUP BY owner
			ON CONFLICT (owner) DO UPDATE SET threads = principal_threads.threads + excluded.threads;
		RETURN NULL;
	END
	$fn$;
	CREATE FUNCTION baton_count_threads_delete() RETURNS trigger LANGUAGE plpgsql AS $fn$
	BEGIN
		UPDATE principal_threads p SET threads = p.threads - d.n
			FROM (SELECT owner, COUNT(*) AS n FROM old_threads GROUP BY owner) d
			WHERE p.owner = d.owner;
		RETURN NULL;
	END
	$fn$;
	CREATE FUNCTION baton_count_threads_owner() RETURNS trigger LANGUAGE plpgsql AS $fn$
	BEGIN
		UPDATE principal_threads SET threads = threads - 1 WHERE owner = OLD.owner;
		INSERT INTO principal_threads (owner, threads) VALUES (NEW.owner, 1)
			ON CONFLICT (owner) DO UPDATE SET threads = principal_threads.threads + 1;
		RETURN NULL;
	END
	$fn$;
	CREATE TRIGGER threads_counted_insert AFTER INSERT ON threads
		REFERENCING NEW TABLE AS new_threads FOR EACH STATEMENT EXECUTE FUNCTION baton_count_threads_insert();
	CREATE TRIGGER threads_counted_delete AFTER DELETE ON threads
		REFERENCING OLD TABLE AS old_threads FOR EACH STATEMENT EXECUTE FUNCTION baton_count_threads_delete();
	CREATE TRIGGER threads_counted_owner AFTER UPDATE OF owner ON threads
		FOR EACH ROW WHEN (NEW.owner IS DISTINCT FROM OLD.owner) EXECUTE FUNCTION baton_count_threads_owner();`

// countOwnerThreads reads the number of threads owner holds ($1).
const countOwnerThreads = `SELECT COALESCE((SELECT threads FROM principal_threads WHERE owner = $1), 0)`
