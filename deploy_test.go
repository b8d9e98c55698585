package main

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"

	"paynotify/config"
	"paynotify/dao"
)

// There is no Docker engine where the tests run: these read the
// Dockerfile and docker-compose.yml for what the program they package
// needs, so the two cannot drift from it unnoticed.

// composeFile is the part of docker-compose.yml the tests read.
type composeFile struct {
	Services map[string]struct {
		Image       string            `yaml:"image"`
		Build       any               `yaml:"build"`
		Command     []string          `yaml:"command"`
		Environment map[string]string `yaml:"environment"`
		Secrets     []string          `yaml:"secrets"`
		ReadOnly    bool              `yaml:"read_only"`
		DependsOn   map[string]struct {
			Condition string `yaml:"condition"`
		} `yaml:"depends_on"`
		Healthcheck struct {
			Test    []string `yaml:"test"`
			Disable bool     `yaml:"disable"`
		} `yaml:"healthcheck"`
	} `yaml:"services"`
	Secrets map[string]struct {
		File string `yaml:"file"`
	} `yaml:"secrets"`
}

func readCompose(t *testing.T) composeFile {
	t.Helper()
	b, err := os.ReadFile("docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var c composeFile
	if err := yaml.Unmarshal(b, &c); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	return c
}

// interpolation is compose's ${VAR}, ${VAR:-default} and ${VAR:?message}.
var interpolation = regexp.MustCompile(`\$\{([A-Z0-9_]+)(?::([-?])([^}]*))?\}`)

// resolve interpolates v as compose would with the reader's environment
// set (the try-out values of docs/production.md).
func resolve(v string, set map[string]string) string {
	return interpolation.ReplaceAllStringFunc(v, func(m string) string {
		p := interpolation.FindStringSubmatch(m)
		if val, ok := set[p[1]]; ok {
			return val
		}
		if p[2] == "-" {
			return p[3]
		}
		return ""
	})
}

func TestComposeFile(t *testing.T) {
	c := readCompose(t)
	for _, name := range []string{"mariadb", "nats", "redis", "migrate", "paynotify", "consume"} {
		if _, ok := c.Services[name]; !ok {
			t.Fatalf("docker-compose.yml has no service %q", name)
		}
	}
	if cmd := c.Services["nats"].Command; !slices.Contains(cmd, "--jetstream") && !slices.Contains(cmd, "-js") {
		t.Errorf("nats runs without JetStream: %v", cmd)
	}

	// The order: MariaDB healthy, migrate done, then serve and consume.
	dep := func(svc, on, cond string) {
		t.Helper()
		if got := c.Services[svc].DependsOn[on].Condition; got != cond {
			t.Errorf("%s depends on %s with %q, want %q", svc, on, got, cond)
		}
	}
	dep("migrate", "mariadb", "service_healthy")
	dep("paynotify", "migrate", "service_completed_successfully")
	dep("consume", "migrate", "service_completed_successfully")

	// What the try-out of docs/production.md sets.
	set := map[string]string{"ALIPAY_APP_ID": "2021000000000009", "ALIPAY_SELLER_ID": "2088000000000009",
		"ADMIN_TOKEN": "change-me-16-chars-or-more"}
	for name, cmd := range map[string]string{"migrate": "migrate", "paynotify": "serve", "consume": "consume"} {
		s := c.Services[name]
		if len(s.Command) != 1 || s.Command[0] != cmd {
			t.Errorf("%s runs %v, want [%s]", name, s.Command, cmd)
		}
		if s.Image != "paynotify:local" || s.Build == nil || !s.ReadOnly {
			t.Errorf("%s: image %q, build %v, read_only %v; want the image built here, read-only", name, s.Image, s.Build, s.ReadOnly)
		}
		// Its environment is a configuration serve accepts...
		var environ []string
		for k, v := range s.Environment {
			environ = append(environ, k+"="+resolve(v, set))
		}
		cfg, err := config.Load(environ)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if cfg.DBDriver != dao.DriverMySQL || cfg.NATSURL == "" || cfg.RedisAddr == "" {
			t.Errorf("%s: driver %q, NATS %q, Redis %q; want MariaDB, NATS and Redis", name, cfg.DBDriver, cfg.NATSURL, cfg.RedisAddr)
		}
		if _, err := dao.MySQLDSN(cfg.DBDSN); err != nil || !strings.Contains(cfg.DBDSN, "tcp(mariadb:3306)") {
			t.Errorf("%s: DB_DSN %q (%v) does not reach the mariadb service", name, cfg.DBDSN, err)
		}
		// ...whose key files are the service's secrets.
		for _, path := range []string{cfg.AppPrivateKeyFile, cfg.AlipayPublicKeyFile} {
			secret, ok := strings.CutPrefix(path, "/run/secrets/")
			if !ok || !slices.Contains(s.Secrets, secret) || c.Secrets[secret].File == "" {
				t.Errorf("%s: key file %q is not one of its secrets %v", name, path, s.Secrets)
			}
		}
	}
	for name, s := range c.Secrets {
		if !strings.HasPrefix(s.File, "./secrets/") {
			t.Errorf("secret %s comes from %q, not ./secrets/ as docs/production.md says", name, s.File)
		}
	}

	// Health: serve is asked by the binary itself; what serves no HTTP is
	// not asked at all.
	if got := c.Services["paynotify"].Healthcheck.Test; !slices.Equal(got, []string{"CMD", "/paynotify", "healthcheck"}) {
		t.Errorf("paynotify's health check is %v", got)
	}
	for _, name := range []string{"migrate", "consume"} {
		if !c.Services[name].Healthcheck.Disable {
			t.Errorf("%s serves no HTTP, yet the image's health check is left on", name)
		}
	}
}

func TestDockerfile(t *testing.T) {
	b, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var final []string // the last stage's instructions
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "FROM ") {
			final = nil
		}
		if line != "" && !strings.HasPrefix(line, "#") {
			final = append(final, line)
		}
	}
	for _, want := range []string{
		"FROM gcr.io/distroless/static-debian12:nonroot",
		"USER 65532:65532",
		// The root file system is not writable: MySQL unless told otherwise.
		"ENV DB_DRIVER=mysql",
		`HEALTHCHECK --interval=10s --timeout=5s --start-period=20s --retries=3 CMD ["/paynotify", "healthcheck"]`,
		`ENTRYPOINT ["/paynotify"]`,
		`CMD ["serve"]`,
		// SQLite's one writable place, for a volume.
		"COPY --from=build --chown=65532:65532 /out/data /data",
	} {
		if !slices.Contains(final, want) {
			t.Errorf("the image's stage lacks %q:\n%s", want, strings.Join(final, "\n"))
		}
	}
	// What the image runs exists and takes no flag it lacks.
	for _, cmd := range []string{"serve", "healthcheck"} {
		err, _, stderr, _ := runCommand(t, cmd, "-h")
		if exitCode(err, &strings.Builder{}) != 0 {
			t.Errorf("paynotify %s -h: %v\n%s", cmd, err, stderr)
		}
	}
}
