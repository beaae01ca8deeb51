package store

import (
	"context"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"time"
)

// sqlSecrets are a SQL store's secrets (Secrets). Values are kept as base64 text, so that
// one DDL serves both SQL backends (SQLite's BLOB and PostgreSQL's BYTEA differ); they are
// small.
type sqlSecrets struct {
	*sqlConn
	d *dialect // the SQL it writes
}

func (s sqlSecrets) PutSecret(ctx context.Context, kind, key string, blob []byte, expires time.Time) error {
	if err := checkSecret(kind, key, blob); err != nil {
		return err
	}
	if err := s.check(); err != nil {
		return err
	}
	_, err := s.exec(ctx, s.d.q(`INSERT INTO secrets (kind, skey, value, expires_at, updated_at)
		VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (kind, skey) DO UPDATE SET
			value = excluded.value, expires_at = excluded.expires_at, updated_at = excluded.updated_at`),
		kind, key, base64.StdEncoding.EncodeToString(blob), expiryNS(expires), time.Now().UnixNano())
	if err != nil {
		return fmt.Errorf("store: put %s: %w", kind, err)
	}
	return nil
}

func (s sqlSecrets) GetSecret(ctx context.Context, kind, key string) ([]byte, error) {
	if err := checkSecretKey(kind, key); err != nil {
		return nil, err
	}
	if err := s.check(); err != nil {
		return nil, err
	}
	var v string
	var exp int64
	err := s.queryRow(ctx, s.d.q(`SELECT value, expires_at FROM secrets WHERE kind = $1 AND skey = $2`), kind, key).Scan(&v, &exp)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, secretNotFound(kind)
	}
	if err != nil {
		return nil, fmt.Errorf("store: get %s: %w", kind, err)
	}
	if lapsed(exp, time.Now()) {
		return nil, secretNotFound(kind)
	}
	return decodeSecret(kind, v)
}

// TakeSecret deletes and reads in one statement: of two replicas deleting the same row,
// only one gets it back (the other's DELETE finds no row).
func (s sqlSecrets) TakeSecret(ctx context.Context, kind, key string) ([]byte, error) {
	if err := checkSecretKey(kind, key); err != nil {
		return nil, err
	}
	if err := s.check(); err != nil {
		return nil, err
	}
	var v string
	var exp int64
	// A write: through tx, so that SQLite's single writer runs it.
	err := s.tx(ctx, "", func(ctx context.Context, tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, s.d.q(`DELETE FROM secrets WHERE kind = $1 AND skey = $2 RETURNING value, expires_at`), kind, key).Scan(&v, &exp)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return nil, secretNotFound(kind)
	}
	if err != nil {
		return nil, fmt.Errorf("store: take %s: %w", kind, err)
	}
	if lapsed(exp, time.Now()) {
		return nil, secretNotFound(kind)
	}
	return decodeSecret(kind, v)
}

func (s sqlSecrets) DeleteSecret(ctx context.Context, kind, key string) error {
	if err := checkSecretKey(kind, key); err != nil {
		return err
	}
	if err := s.check(); err != nil {
		return err
	}
	if _, err := s.exec(ctx, s.d.q(`DELETE FROM secrets WHERE kind = $1 AND skey = $2`), kind, key); err != nil {
		return fmt.Errorf("store: delete %s: %w", kind, err)
	}
	return nil
}

func (s sqlSecrets) SweepSecrets(ctx context.Context, now time.Time) (int64, error) {
	if err := s.check(); err != nil {
		return 0, err
	}
	res, err := s.exec(ctx, s.d.q(`DELETE FROM secrets WHERE expires_at > 0 AND expires_at <= $1`), now.UnixNano())
	if err != nil {
		return 0, fmt.Errorf("store: sweep secrets: %w", err)
	}
	n, _ := res.RowsAffected()
	return n, nil
}

func decodeSecret(kind, v string) ([]byte, error) {
	b, err := base64.StdEncoding.DecodeString(v)
	if err != nil {
		return nil, fmt.Errorf("store: %s: stored value is not base64: %w", kind, err)
	}
	return b, nil
}
