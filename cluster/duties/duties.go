// Package duties runs a leader's duties: the routines a node runs only
// while it leads (the commit pusher, the promoter, webhook delivery,
// purges, backups, ...). They are one list, which the leader loop starts
// together once its term is established and stops together when
// leadership ends or the node begins to stop, as Consul's
// leaderRoutineManager runs its leader routines: each duty alike, under a
// context of its own, and a stop that waits until it has returned.
package duties

import (
	"context"
	"fmt"
	"slices"
	"sync"
)

// Duty is one leader duty. Run returns once ctx is done.
type Duty struct {
	Name string
	Run  func(ctx context.Context)
}

// Manager runs duties by name; at most one of each name at a time.
type Manager struct {
	mu      sync.Mutex
	running map[string]*routine
}

// routine is a running duty: cancel ends its context, done closes when
// its Run has returned.
type routine struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// New returns a manager that runs nothing yet.
func New() *Manager { return &Manager{running: map[string]*routine{}} }

// Start runs d under a context derived from ctx; a duty of the same name
// that runs already is an error, and it goes on as it was.
func (m *Manager) Start(ctx context.Context, d Duty) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.running[d.Name]; ok {
		return fmt.Errorf("leader duty %s runs already", d.Name)
	}
	ctx, cancel := context.WithCancel(ctx)
	r := &routine{cancel: cancel, done: make(chan struct{})}
	m.running[d.Name] = r
	go func() {
		defer close(r.done)
		d.Run(ctx)
	}()
	return nil
}

// StartAll starts every duty of list, in order; it stops at the first
// that cannot start, and says which.
func (m *Manager) StartAll(ctx context.Context, list []Duty) error {
	for _, d := range list {
		if err := m.Start(ctx, d); err != nil {
			return err
		}
	}
	return nil
}

// Stop ends the duty name and waits until it has returned; a duty that
// does not run is nothing to stop.
func (m *Manager) Stop(name string) {
	m.mu.Lock()
	r, ok := m.running[name]
	delete(m.running, name)
	m.mu.Unlock()
	if ok {
		r.cancel()
		<-r.done
	}
}

// StopAll ends every duty at once and waits until all have returned.
func (m *Manager) StopAll() {
	m.mu.Lock()
	stopping := m.running
	m.running = map[string]*routine{}
	m.mu.Unlock()
	for _, r := range stopping {
		r.cancel()
	}
	for _, r := range stopping {
		<-r.done
	}
}

// Running names the duties that run, sorted.
func (m *Manager) Running() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	names := make([]string, 0, len(m.running))
	for name := range m.running {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}
