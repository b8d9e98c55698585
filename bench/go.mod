module paynotify/bench

go 1.26.8

require (
	github.com/go-sql-driver/mysql v1.10.1
	github.com/google/pprof v0.0.0-20261105003125-4bf881d7fb0b
	paynotify v0.0.0
)

require (
	code.dny.dev/ssrf v0.3.0 // indirect
	filippo.io/bigmod v0.1.0 // indirect
	filippo.io/edwards25519 v1.2.0 // indirect
	github.com/caarlos0/env/v11 v11.4.2 // indirect
	github.com/shopspring/decimal v1.6.0 // indirect
	github.com/smartwalle/alipay/v3 v3.2.31 // indirect
	github.com/smartwalle/ncrypto v1.0.4 // indirect
	github.com/smartwalle/ngx v1.1.2 // indirect
	github.com/smartwalle/nsign v1.0.9 // indirect
	golang.org/x/crypto v0.58.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
	golang.org/x/text v0.44.0 // indirect
)

replace paynotify => ../
