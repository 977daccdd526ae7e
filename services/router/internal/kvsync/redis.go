package kvsync

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/proto"

	"github.com/switchyard-dev/switchyard/internal/rediskeys"
	eventsv1 "github.com/switchyard-dev/switchyard/proto/switchyard/events/v1"
)

// RedisStore reads the kvtracker's snapshots from Redis.
type RedisStore struct {
	c redis.UniversalClient
}

// NewRedisStore reads snapshots through c.
func NewRedisStore(c redis.UniversalClient) *RedisStore { return &RedisStore{c: c} }

// scanBatch is the SCAN COUNT hint and the MGET batch size.
const scanBatch = 100

// List implements SnapshotStore: SCAN for the snapshot keys, then MGET them
// in batches. A key that expires between the two is simply absent.
func (s *RedisStore) List(ctx context.Context) ([]*eventsv1.WorkerKVSnapshot, int, error) {
	var keys []string
	var cursor uint64
	for {
		batch, next, err := s.c.Scan(ctx, cursor, rediskeys.KVSnapshotPattern, scanBatch).Result()
		if err != nil {
			return nil, 0, fmt.Errorf("scan %s: %w", rediskeys.KVSnapshotPattern, err)
		}
		keys = append(keys, batch...)
		if cursor = next; cursor == 0 {
			break
		}
	}
	var out []*eventsv1.WorkerKVSnapshot
	bad := 0
	for off := 0; off < len(keys); off += scanBatch {
		chunk := keys[off:min(off+scanBatch, len(keys))]
		vals, err := s.c.MGet(ctx, chunk...).Result()
		if err != nil {
			return nil, bad, fmt.Errorf("mget kv snapshots: %w", err)
		}
		for _, v := range vals {
			str, ok := v.(string)
			if !ok {
				continue // expired meanwhile
			}
			var snap eventsv1.WorkerKVSnapshot
			if err := proto.Unmarshal([]byte(str), &snap); err != nil {
				bad++
				continue
			}
			out = append(out, &snap)
		}
	}
	return out, bad, nil
}

// Get implements SnapshotStore.
func (s *RedisStore) Get(ctx context.Context, pool, worker string) (*eventsv1.WorkerKVSnapshot, error) {
	key := rediskeys.KVSnapshot(pool, worker)
	b, err := s.c.Get(ctx, key).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", key, err)
	}
	var snap eventsv1.WorkerKVSnapshot
	if err := proto.Unmarshal(b, &snap); err != nil {
		return nil, fmt.Errorf("decode %s: %w", key, err)
	}
	return &snap, nil
}
