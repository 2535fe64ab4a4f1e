package main

import (
	"context"
	"net/http"
	"sync"

	"github.com/kvroute/kvroute/bench/internal/simcluster"
)

// outcome is what the client saw of one request.
type outcome = simcluster.Outcome

// drive sends the requests in order with `concurrency` clients; a request whose After is set waits
// until that request finished (a chat turn follows its previous turn).
func drive(ctx context.Context, client *http.Client, base string, reqs []request, concurrency int) []outcome {
	out := make([]outcome, len(reqs))
	done := make([]chan struct{}, len(reqs))
	for i := range done {
		done[i] = make(chan struct{})
	}
	next := make(chan int)
	go func() {
		defer close(next)
		for i := range reqs {
			select {
			case next <- i:
			case <-ctx.Done():
				return
			}
		}
	}()
	var wg sync.WaitGroup
	for range concurrency {
		wg.Go(func() {
			for i := range next {
				if a := reqs[i].After; a >= 0 {
					<-done[a] // taken earlier by a client that waits on nothing later: no deadlock
				}
				out[i] = simcluster.Send(ctx, client, base+"/v1/chat/completions", reqs[i].Body)
				close(done[i])
			}
		})
	}
	wg.Wait()
	return out
}
