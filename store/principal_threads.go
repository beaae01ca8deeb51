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

// schemaPrincipalThreadsPostgres is the PostgreSQL migration (version 13). The count row is
// written under the owner's advisory lock that a capped start already takes for a new thread
// (dialect.lockOwner), so it adds no contention of its own there.
const schemaPrincipalThreadsPostgres = `CREATE TABLE principal_threads (
		owner   TEXT PRIMARY KEY,
		threads BIGINT NOT NULL
	);
	INSERT INTO principal_threads (owner, threads) SELECT owner, COUNT(*) FROM threads GROUP BY owner;
	CREATE FUNCTION baton_count_threads() RETURNS trigger LANGUAGE plpgsql AS $fn$
	BEGIN
		IF TG_OP IN ('DELETE', 'UPDATE') THEN
			UPDATE principal_threads SET threads = threads - 1 WHERE owner = OLD.owner;
		END IF;
		IF TG_OP IN ('INSERT', 'UPDATE') THEN
			INSERT INTO principal_threads (owner, threads) VALUES (NEW.owner, 1)
				ON CONFLICT (owner) DO UPDATE SET threads = principal_threads.threads + 1;
		END IF;
		RETURN NULL;
	END
	$fn$;
	CREATE TRIGGER threads_counted AFTER INSERT OR DELETE ON threads
		FOR EACH ROW EXECUTE FUNCTION baton_count_threads();
	CREATE TRIGGER threads_counted_owner AFTER UPDATE OF owner ON threads
		FOR EACH ROW WHEN (NEW.owner IS DISTINCT FROM OLD.owner) EXECUTE FUNCTION baton_count_threads();`

// countOwnerThreads reads the number of threads owner holds ($1).
const countOwnerThreads = `SELECT COALESCE((SELECT threads FROM principal_threads WHERE owner = $1), 0)`
