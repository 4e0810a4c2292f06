// Privacy-critical: needs DP review.

package release

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"time"

	"github.com/dpproxy/dpproxy/accountant"
	"github.com/dpproxy/dpproxy/internal/pgerr"
)

// Statements with several DP leaves (post-processing SQL, proxy/post.go)
// are released by RunBatch under one ledger charge: every leaf is checked
// and calibrated, then the events of all the leaves not answered from the
// cache are reserved together (refused as a whole, 53400, when they do not
// fit), and only then is any private row read. The proxy also checks the
// whole statement against the remaining budget first (CheckTotal,
// precheck.go), to refuse it with the statement's total in the message.

// RunBatch answers reqs (the DP leaves of one statement: one analyst, one
// dataset) under one ledger charge, as described above; results are in
// the order of reqs. A leaf answered from the answer cache costs nothing
// and is not part of the charge. Every failure after the charge is one
// incident of the statement (incident.go).
func (r *Releaser) RunBatch(ctx context.Context, reqs []Request) ([]*Result, error) {
	if len(reqs) == 0 {
		return nil, nil
	}
	first := reqs[0]
	for _, req := range reqs {
		if err := checkRequest(req); err != nil {
			return nil, err
		}
		if req.Analyst != first.Analyst || req.Dataset != first.Dataset {
			return nil, pgerr.New(pgerr.InternalError, "internal error: a batch of several analysts or datasets")
		}
	}
	if err := r.suspendedHere(first); err != nil {
		return nil, err
	}
	out := make([]*Result, len(reqs))
	type leaf struct {
		i   int
		cal *calibration
		key string
	}
	var todo []leaf
	var events []accountant.Event
	same := map[int]int{} // a leaf asked twice: index of its first occurrence
	seen := map[string]int{}
	for i, req := range reqs {
		key := cacheKey(req)
		if j, ok := seen[key]; ok {
			// The same query twice in one statement gets one answer
			// and one charge, as it would from the cache.
			same[i] = j
			continue
		}
		seen[key] = i
		if !req.NoCache {
			res, ok, err := r.cached(ctx, req, key)
			if err != nil {
				return nil, err
			}
			if ok {
				out[i] = res
				continue
			}
		}
		cal, err := r.calibrate(req) // before any charge
		if err != nil {
			return nil, err
		}
		todo = append(todo, leaf{i, cal, key})
		events = append(events, cal.events...)
	}
	defer func() {
		for i, j := range same {
			out[i] = out[j]
		}
	}()
	if len(todo) == 0 {
		return out, nil
	}
	keys := make([]string, len(todo))
	for j, l := range todo {
		keys[j] = l.key
	}
	bkey := batchKey(keys)
	_, err := r.runCharged(ctx, first, func(ch *charged) (*Result, error) {
		res, err := r.reserve(ctx, first, events, bkey)
		if err != nil {
			return nil, err
		}
		ch.res, ch.key = res, bkey
		answers := make([]*storedAnswer, len(todo))
		for j, l := range todo {
			// Each leaf's NOTICE states what its own mechanisms cost
			// (basic composition; the charge of the statement, which the
			// accountant may compose to less, is res.Cost).
			lr := *res
			lr.Cost = basicCost(l.cal.events)
			o, sa, err := r.execute(ctx, l.cal, &lr, l.key)
			if err != nil {
				return nil, err
			}
			out[l.i], answers[j] = o, sa
		}
		ready := time.Now()
		leaves := make([]batchLeaf, len(todo))
		for j, l := range todo {
			out[l.i].ReadyAt = ready
			leaves[j] = batchLeaf{req: l.cal.req, key: l.key}
		}
		r.recordBatch(ctx, first, res, leaves, answers)
		return nil, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// basicCost is the basic composition of events: the sum of their ε and δ.
func basicCost(events []accountant.Event) accountant.Spent {
	var c accountant.Spent
	for _, e := range events {
		c.Epsilon += e.Epsilon
		c.Delta += e.Delta
	}
	return c
}

// batchKey is the ledger fingerprint of a batch's one charge: a hash of
// its leaves' keys, in order.
func batchKey(keys []string) string {
	h := sha256.New()
	for _, k := range keys {
		h.Write([]byte(strconv.Quote(k)))
		h.Write([]byte{0})
	}
	return "batch:" + hex.EncodeToString(h.Sum(nil)[:16])
}

// batchLeaf names one recorded leaf of a batch.
type batchLeaf struct {
	req Request
	key string
}

// recordBatch stores a batch's released answers, in order, on its one
// reservation, at the batch's publish time (as record does for one
// answer); only then do the leaves enter the in-memory answer cache, each
// under its own key.
func (r *Releaser) recordBatch(ctx context.Context, first Request, res *accountant.Reservation, leaves []batchLeaf, answers []*storedAnswer) {
	if !waitPublish(ctx, first) {
		return
	}
	r.statuses.put(statusKeyOf(first), res.Status)
	stored := storedBatchJSON(answers)
	if r.ledger.Release(ctx, res, stored) != nil || stored == nil {
		return // only stored answers enter memory (record)
	}
	for j, l := range leaves {
		r.answers.put(answerKeyOf(l.req, l.key), answers[j])
	}
}
