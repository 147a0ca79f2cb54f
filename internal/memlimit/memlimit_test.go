package memlimit

import (
	"strings"
	"testing"
	"testing/fstest"
)

func TestApplySetsAShareOfTheContainersLimit(t *testing.T) {
	cases := map[string]struct {
		env     string
		files   map[string]string
		want    int64
		wantErr string
	}{
		"cgroup v2 limit":               {files: map[string]string{"memory.max": "1073741824\n"}, want: 966367641},
		"cgroup v2 without a limit":     {files: map[string]string{"memory.max": "max\n"}},
		"cgroup v1 limit":               {files: map[string]string{"memory/memory.limit_in_bytes": "536870912\n"}, want: 483183820},
		"cgroup v1 without a limit":     {files: map[string]string{"memory/memory.limit_in_bytes": "9223372036854771712\n"}},
		"v2 read before v1":             {files: map[string]string{"memory.max": "2147483648", "memory/memory.limit_in_bytes": "1024"}, want: 1932735283},
		"no cgroup mounted":             {files: map[string]string{}},
		"GOMEMLIMIT set by an operator": {env: "800MiB", files: map[string]string{"memory.max": "1073741824"}},
		"garbage in memory.max":         {files: map[string]string{"memory.max": "lots"}, wantErr: `holds "lots"`},
		"a negative limit":              {files: map[string]string{"memory.max": "-1"}, wantErr: "not a number of bytes"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cgroup := fstest.MapFS{}
			for path, data := range tc.files {
				cgroup[path] = &fstest.MapFile{Data: []byte(data)}
			}
			var setTo int64
			got, err := apply(tc.env, cgroup, func(n int64) int64 { setTo = n; return 0 })
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want || setTo != tc.want {
				t.Fatalf("returned %d and set %d, want %d", got, setTo, tc.want)
			}
		})
	}
}
