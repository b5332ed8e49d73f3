package app

import (
	"flag"
	"time"

	"github.com/qas-dev/qas/decider/decide"
	"github.com/qas-dev/qas/internal/cli"
)

// burstFlags are --burst-rise and --burst-every, which simulate and evaluate
// tell qas as a QueueAutoscaler's spec.burst.
type burstFlags struct {
	rise  *float64
	every *time.Duration
}

// addBurstFlags defines the flags on fs; whom says who is told of the rise.
func addBurstFlags(fs *flag.FlagSet, whom string) burstFlags {
	return burstFlags{
		rise: fs.Float64("burst-rise", 0, "tell "+whom+" that a rise of this multiple of the arrival rate may come within one init time without warning "+
			"(spec.burst.rise, in (1, 100]; 0: none; percentile targets only)"),
		every: fs.Duration("burst-every", decide.DefaultBurstEvery, "with --burst-rise: how often at most that rise comes (spec.burst.every, 1m to 720h)"),
	}
}

// burst is the declared rise (none while --burst-rise is 0), checked as the
// engine checks spec.burst (decide.Burst.Check) for a target at percentile
// (0: the mean); the error names the flag at fault.
func (f burstFlags) burst(percentile float64) (decide.Burst, error) {
	if *f.every <= 0 {
		return decide.Burst{}, cli.Usagef("burst-every", "must be between %s and %s, got %v", decide.MinBurstEvery, decide.MaxBurstEvery, *f.every)
	}
	b := decide.Burst{Rise: *f.rise, Every: *f.every}
	if b.Rise == 0 {
		return decide.Burst{}, nil
	}
	errs := b.Check(percentile)
	if len(errs) == 0 {
		return b, nil
	}
	name := "burst-rise"
	if errs[0].Field == ".every" {
		name = "burst-every"
	}
	return decide.Burst{}, cli.Usagef(name, "%s", errs[0].Msg)
}
