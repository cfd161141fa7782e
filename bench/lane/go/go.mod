module litelane.dev/bench/lane

go 1.22

require github.com/mattn/go-sqlite3 v1.14.53
