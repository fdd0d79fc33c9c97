// Command footprint reads a callgrind profile of a benchmark, recorded
// per instruction, and reports how much machine code one operation runs:
// the 64-byte lines holding an instruction executed at least once per
// operation on average. In a busy server the decision's code is evicted
// from the instruction cache between two requests, so each of these
// lines is fetched again for every request. `bench/instructions.sh -lines`
// records the profile and runs this command.
//
//	go run ./bench/footprint -n 20000 callgrind.out
package main

import (
	"bufio"
	"cmp"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
)

func main() {
	n := flag.Int("n", 0, "iterations the profile ran the benchmark for")
	module := flag.String("module", "github.com/mcpratelimit/caddy-mcp-ratelimit", "functions whose name holds this are the module's")
	top := flag.Int("top", 25, "how many of the module's functions to list")
	flag.Parse()
	if *n <= 0 || flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: footprint -n <iterations> <callgrind.out>")
		os.Exit(2)
	}
	cost, fnOf, err := readProfile(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, "footprint:", err)
		os.Exit(1)
	}
	// A line is hot when one of its instructions ran 0.9 times per
	// operation or more (the benchmark's first, one-iteration run adds a
	// little; a loop runs its instructions more than once).
	lineFn := map[uint64]string{}
	hot := 0
	for addr, c := range cost {
		if c*10 < uint64(*n)*9 {
			continue
		}
		hot++
		line := addr >> 6
		if f, ok := lineFn[line]; !ok || fnOf[addr] < f {
			lineFn[line] = fnOf[addr]
		}
	}
	perFn := map[string]int{}
	mod := 0
	for _, f := range lineFn {
		perFn[f]++
		if strings.Contains(f, *module) {
			mod++
		}
	}
	fmt.Printf("hot instructions %d, hot lines %d (%d bytes), of them the module's %d (%d bytes)\n",
		hot, len(lineFn), len(lineFn)*64, mod, mod*64)
	var fns []string
	for f := range perFn {
		if strings.Contains(f, *module) {
			fns = append(fns, f)
		}
	}
	slices.SortFunc(fns, func(a, b string) int {
		return cmp.Or(perFn[b]-perFn[a], strings.Compare(a, b))
	})
	for _, f := range fns[:min(*top, len(fns))] {
		fmt.Printf("%5d %s\n", perFn[f], strings.ReplaceAll(f, *module, "…"))
	}
}

// readProfile returns the self cost of every instruction address in a
// callgrind profile written with --dump-instr=yes --compress-pos=no
// --compress-strings=no, and the function each address belongs to.
func readProfile(path string) (map[uint64]uint64, map[uint64]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	cost := map[uint64]uint64{}
	fnOf := map[uint64]string{}
	fn := ""
	call := false // the next cost line is a call's inclusive cost
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "fn="):
			fn = line[len("fn="):]
		case strings.HasPrefix(line, "calls="):
			call = true
		case strings.HasPrefix(line, "0x"):
			if call {
				call = false
				continue
			}
			fields := strings.Fields(line)
			addr, err := strconv.ParseUint(fields[0][2:], 16, 64)
			if err != nil {
				return nil, nil, fmt.Errorf("%q: %v", line, err)
			}
			c, err := strconv.ParseUint(fields[len(fields)-1], 10, 64)
			if err != nil {
				return nil, nil, fmt.Errorf("%q: %v", line, err)
			}
			cost[addr] += c
			if _, ok := fnOf[addr]; !ok {
				fnOf[addr] = fn
			}
		}
	}
	return cost, fnOf, sc.Err()
}
