package drills

import (
	"cmp"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// clockTick is Linux's USER_HZ, the unit of /proc's CPU times (100 on
// every architecture Go runs tests on).
const clockTick = 100

// cpuSample is the fleet's CPU time at one moment: the machine's busy and
// total time from /proc/stat, and each process's from /proc/PID/stat.
type cpuSample struct {
	at          time.Time
	busy, total float64 // seconds, summed over cores
	procs       map[string]float64
}

// cpuNow samples the machine and every process of the fleet.
func (f *fleet) cpuNow() cpuSample {
	s := cpuSample{at: time.Now(), procs: map[string]float64{}}
	if b, err := os.ReadFile("/proc/stat"); err == nil {
		line, _, _ := strings.Cut(string(b), "\n")
		fields := strings.Fields(line)[1:] // user nice system idle iowait irq softirq steal ...
		for i, fld := range fields {
			v, _ := strconv.ParseFloat(fld, 64)
			s.total += v / clockTick
			if i != 3 && i != 4 { // idle, iowait
				s.busy += v / clockTick
			}
		}
	}
	for _, p := range f.procs {
		if c, ok := procCPU(p.pid()); ok {
			s.procs[p.name] = c
		}
	}
	return s
}

// procCPU is a process's user and system time in seconds.
func procCPU(pid int) (float64, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	// The command name (field 2) may hold spaces; the fields after its
	// closing parenthesis start with field 3.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, false
	}
	u, _ := strconv.ParseFloat(f[11], 64)  // utime, field 14
	st, _ := strconv.ParseFloat(f[12], 64) // stime, field 15
	return (u + st) / clockTick, true
}

// cpuUse describes the CPU used between two samples, in cores: the
// machine's (everything on it, the fleet or not) and each kind of process.
func cpuUse(a, b cpuSample, cores int) string {
	wall := b.at.Sub(a.at).Seconds()
	if wall <= 0 {
		return "-"
	}
	kinds := map[string]float64{}
	var fleet float64
	for name, end := range b.procs {
		d := end - a.procs[name]
		kind := name
		if i := strings.LastIndexByte(name, '-'); i > 0 {
			kind = name[:i]
		}
		kinds[kind] += d
		fleet += d
	}
	names := slices.Collect(maps.Keys(kinds))
	slices.SortFunc(names, func(x, y string) int { return cmp.Or(cmp.Compare(kinds[y], kinds[x]), cmp.Compare(x, y)) })
	var parts []string
	for _, k := range names {
		if c := kinds[k] / wall; c >= 0.005 {
			parts = append(parts, fmt.Sprintf("%s %.2f", k, c))
		}
	}
	machine := "-"
	if b.total > a.total {
		machine = fmt.Sprintf("%.2f of %d", float64(cores)*(b.busy-a.busy)/(b.total-a.total), cores)
	}
	return fmt.Sprintf("machine %s cores busy, the fleet %.2f (%s) over %.1fs", machine, fleet/wall, strings.Join(parts, ", "), wall)
}
