package cluster

import (
	"context"
	"strconv"
	"sync"

	"github.com/hashicorp/raft"
	"github.com/valyala/fasthttp"

	"github.com/linkraft/linkraft/cluster/wire"
)

// appliedIndexes asks every other server of servers what it has applied, concurrently and bounded by ctx: GET
// applied?index=N answers once the server has applied N or after
// visibilityWait, and at once for index 0 (every version of the protocol
// serves it). Deletes wait on it, the lag monitor and Status read it. A
// server that did not answer is absent from the result.
func (c *peerClient) appliedIndexes(ctx context.Context, servers []raft.Server, index uint64) map[string]uint64 {
	path := wire.PathApplied + "?index=" + strconv.FormatUint(index, 10)
	got := make(map[string]uint64, len(servers))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, s := range servers {
		id := string(s.ID)
		if s.ID == c.self {
			continue
		}
		addr := string(c.addrs.resolve(s.ID, s.Address))
		wg.Go(func() {
			var answer wire.AppliedAnswer
			if err := c.call(ctx, addr, fasthttp.MethodGet, path, nil, &answer); err != nil {
				c.log.Debug("a server did not say what it applied", "id", id, "err", err)
				return
			}
			mu.Lock()
			got[id] = answer.Index
			mu.Unlock()
		})
	}
	wg.Wait()
	return got
}
