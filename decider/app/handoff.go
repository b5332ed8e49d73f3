package app

import (
	"flag"
	"fmt"
	"time"

	"github.com/qas-dev/qas/decider/evaluate/sim"
	"github.com/qas-dev/qas/internal/cli"
)

// maxHop is the longest extra hop the flags take: a hop is a proxy-to-proxy
// round trip on one network, and one of a second or more would put every
// handed-off request over any target the simulator is for.
const maxHop = time.Second

// handoffFlags are --hop and --advert, the pooled data planes' costs
// (sim.Handoff) that simulate and evaluate --pooling share.
type handoffFlags struct {
	hop, advert *time.Duration
}

// addHandoffFlags defines the flags on fs; when says when they apply.
func addHandoffFlags(fs *flag.FlagSet, when string) handoffFlags {
	return handoffFlags{
		hop: fs.Duration("hop", time.Duration(sim.DefaultHandoff.Hop*float64(time.Second)),
			when+": the latency of each extra hop (to a peer, back from a refusing one, through the front; 0 to "+maxHop.String()+")"),
		advert: fs.Duration("advert", time.Duration(sim.DefaultHandoff.Period*float64(time.Second)),
			when+": the period of the peers' free-slot advertisements and of the front's check"),
	}
}

// handoff is the sim.Handoff the flags give; the error names the flag at fault.
func (f handoffFlags) handoff() (sim.Handoff, error) {
	if *f.hop < 0 || *f.hop > maxHop {
		return sim.Handoff{}, cli.Usagef("hop", "must be between 0 and %v, got %v", maxHop, *f.hop)
	}
	if *f.advert <= 0 {
		return sim.Handoff{}, cli.Usagef("advert", "must be positive, got %v", *f.advert)
	}
	return sim.Handoff{Hop: f.hop.Seconds(), Period: f.advert.Seconds()}, nil
}

// describe is the flags' part of a run's conditions.
func (f handoffFlags) describe() string {
	return fmt.Sprintf("extra hop %v, advertisements and front checks every %v", *f.hop, *f.advert)
}
