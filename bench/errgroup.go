package bench

import "golang.org/x/sync/errgroup"

// errgroupPool is errgroup.Group with SetLimit(Conc): Go blocks while Conc
// funcs run.
type errgroupPool struct {
	g errgroup.Group
}

var _ Pool = (*errgroupPool)(nil)

func newErrgroupPool(conc int) *errgroupPool {
	p := &errgroupPool{}
	p.g.SetLimit(conc)
	return p
}

func (p *errgroupPool) Go(f func()) error {
	p.g.Go(func() error {
		f()
		return nil
	})
	return nil
}

func (p *errgroupPool) Wait()  { _ = p.g.Wait() }
func (p *errgroupPool) Close() {}
