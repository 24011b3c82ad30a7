package bench

import (
	"bufio"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Machine describes where a report was measured.
type Machine struct {
	CPU        string `json:"cpu"`
	Cores      int    `json:"cores"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	Go         string `json:"go"`
	OS         string `json:"os"`
	Arch       string `json:"arch"`
	// Load is the 1-minute load average when the run started ("" where unknown):
	// figures from a busy machine are only indicative.
	Load string `json:"load,omitempty"`
	// Date is when the run started, in RFC 3339.
	Date string `json:"date"`
}

// ThisMachine describes the machine the process runs on.
func ThisMachine() Machine {
	return Machine{
		CPU:        cpuModel(),
		Cores:      runtime.NumCPU(),
		GOMAXPROCS: runtime.GOMAXPROCS(0),
		Go:         runtime.Version(),
		OS:         runtime.GOOS,
		Arch:       runtime.GOARCH,
		Load:       loadAverage(),
		Date:       time.Now().UTC().Format(time.RFC3339),
	}
}

// String is the one-line machine description printed above the tables.
func (m Machine) String() string {
	var b strings.Builder
	b.WriteString(m.CPU)
	b.WriteString(", ")
	b.WriteString(strconv.Itoa(m.Cores))
	b.WriteString(" cores, GOMAXPROCS ")
	b.WriteString(strconv.Itoa(m.GOMAXPROCS))
	b.WriteString(", ")
	b.WriteString(m.Go)
	b.WriteString(" ")
	b.WriteString(m.OS + "/" + m.Arch)
	if m.Load != "" {
		b.WriteString(", load ")
		b.WriteString(m.Load)
	}
	return b.String()
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	if f := strings.Fields(string(b)); len(f) > 0 {
		return f[0]
	}
	return ""
}
