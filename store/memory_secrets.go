package store

import (
	"context"
	"slices"
	"time"
)

// memSecrets are the memory store's secrets (Secrets).
type memSecrets struct {
	*memState
	secrets map[secretKey]memSecret
}

// memSecret is one value of the memory store's Secrets.
type memSecret struct {
	blob    []byte
	expires int64 // Unix ns; 0: never
}

// secretKey is the key of a memory secret.
type secretKey struct{ kind, key string }

func (m *memSecrets) PutSecret(ctx context.Context, kind, key string, blob []byte, expires time.Time) error {
	if err := checkSecret(kind, key, blob); err != nil {
		return err
	}
	if err := m.begin(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	if m.secrets == nil {
		m.secrets = map[secretKey]memSecret{}
	}
	m.secrets[secretKey{kind, key}] = memSecret{blob: slices.Clone(blob), expires: expiryNS(expires)}
	return nil
}

func (m *memSecrets) GetSecret(ctx context.Context, kind, key string) ([]byte, error) {
	if err := checkSecretKey(kind, key); err != nil {
		return nil, err
	}
	if err := m.begin(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	v, ok := m.secrets[secretKey{kind, key}]
	if !ok || lapsed(v.expires, time.Now()) {
		return nil, secretNotFound(kind)
	}
	return slices.Clone(v.blob), nil
}

func (m *memSecrets) TakeSecret(ctx context.Context, kind, key string) ([]byte, error) {
	if err := checkSecretKey(kind, key); err != nil {
		return nil, err
	}
	if err := m.begin(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	k := secretKey{kind, key}
	v, ok := m.secrets[k]
	delete(m.secrets, k)
	if !ok || lapsed(v.expires, time.Now()) {
		return nil, secretNotFound(kind)
	}
	return v.blob, nil
}

func (m *memSecrets) DeleteSecret(ctx context.Context, kind, key string) error {
	if err := checkSecretKey(kind, key); err != nil {
		return err
	}
	if err := m.begin(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	delete(m.secrets, secretKey{kind, key})
	return nil
}

func (m *memSecrets) SweepSecrets(ctx context.Context, now time.Time) (int64, error) {
	if err := m.begin(ctx); err != nil {
		return 0, err
	}
	defer m.mu.Unlock()
	var n int64
	for k, v := range m.secrets {
		if lapsed(v.expires, now) {
			delete(m.secrets, k)
			n++
		}
	}
	return n, nil
}
