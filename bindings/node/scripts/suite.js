'use strict';
// better-sqlite3 12.11.1's own mocha suite, unchanged, on real better-sqlite3
// (built from source) and on litelane's package; prints the comparison.
// Usage: node bindings/node/scripts/suite.js   (or scripts/node-suite)
// Env: BSQ_REPO  a git clone of WiseLibs/better-sqlite3 with tag v12.11.1
//      (default /work/.mirror/WiseLibs+better-sqlite3/repo).
const { execFileSync, spawnSync } = require('child_process');
const fs = require('fs');
const path = require('path');

const pkg = path.join(__dirname, '..');
const repoRoot = path.join(pkg, '..', '..');
const cache = path.join(repoRoot, 'target', 'node-suite');
const deps = path.join(cache, 'deps');
const TAG = 'v12.11.1';
const bsqRepo = process.env.BSQ_REPO || '/work/.mirror/WiseLibs+better-sqlite3/repo';
const started = Date.now();

function sh(cmd, args, opts = {}) {
	execFileSync(cmd, args, { stdio: 'inherit', ...opts });
}

// 1. Dependencies: better-sqlite3 from source, and the suite's own.
fs.mkdirSync(deps, { recursive: true });
if (!fs.existsSync(path.join(deps, 'node_modules', 'better-sqlite3', 'build', 'Release', 'better_sqlite3.node'))) {
	fs.writeFileSync(path.join(deps, 'package.json'), '{ "name": "litelane-node-suite-deps", "private": true }\n');
	sh('npm', ['install', '--no-audit', '--no-fund', '--build-from-source', '--nodedir=/usr',
		'better-sqlite3@12.11.1', 'mocha@11.7.5', 'chai@4.5.0', 'fs-extra@11.3.0'], { cwd: deps });
}
if (!fs.existsSync(path.join(pkg, 'litelane.node'))) sh('node', [path.join(pkg, 'scripts', 'build.js')]);

// 2. The suite: test/ of the tag, unchanged.
const tests = path.join(cache, 'bsq-test');
if (!fs.existsSync(path.join(tests, 'test'))) {
	fs.mkdirSync(tests, { recursive: true });
	const tar = execFileSync('git', ['-C', bsqRepo, 'archive', TAG, 'test'], { maxBuffer: 1 << 28 });
	execFileSync('tar', ['x', '-C', tests], { input: tar });
}

// 3. One run directory per engine; `require('../.')` in the tests resolves
//    to that directory's package.
function prepareRun(name, makeRoot) {
	const dir = path.join(cache, `run-${name}`);
	fs.rmSync(dir, { recursive: true, force: true });
	makeRoot(dir);
	fs.cpSync(path.join(tests, 'test'), path.join(dir, 'test'), { recursive: true });
	return dir;
}
const realBsq = path.join(deps, 'node_modules', 'better-sqlite3');
const runs = {
	'better-sqlite3': prepareRun('better-sqlite3', (dir) => {
		fs.cpSync(realBsq, dir, { recursive: true });
		fs.symlinkSync(path.join(deps, 'node_modules'), path.join(dir, 'node_modules'));
	}),
	litelane: prepareRun('litelane', (dir) => {
		fs.mkdirSync(dir, { recursive: true });
		fs.writeFileSync(path.join(dir, 'package.json'), '{ "name": "better-sqlite3", "main": "index.js" }\n');
		fs.writeFileSync(path.join(dir, 'index.js'), `module.exports = require(${JSON.stringify(pkg)});\n`);
		fs.symlinkSync(path.join(deps, 'node_modules'), path.join(dir, 'node_modules'));
		// The load-extension tests' fixture: a plain SQLite extension that
		// better-sqlite3's build compiles next to its addon (engine-agnostic).
		const ext = path.join(realBsq, 'build', 'Release', 'test_extension.node');
		if (fs.existsSync(ext)) {
			fs.mkdirSync(path.join(dir, 'build', 'Release'), { recursive: true });
			fs.copyFileSync(ext, path.join(dir, 'build', 'Release', 'test_extension.node'));
		}
	}),
};

function run(name) {
	const t0 = Date.now();
	const out = spawnSync(process.execPath, [path.join(deps, 'node_modules', 'mocha', 'bin', 'mocha.js'),
		'--exit', '--timeout=5000', '--reporter', 'json', '--reporter-option', `output=${path.join(cache, name + '.json')}`],
		{ cwd: runs[name], encoding: 'utf8', maxBuffer: 1 << 28, timeout: 600000 });
	const file = path.join(cache, name + '.json');
	if (!fs.existsSync(file)) {
		console.error(out.stdout, out.stderr);
		throw new Error(`mocha on ${name} wrote no report`);
	}
	const report = JSON.parse(fs.readFileSync(file, 'utf8'));
	const state = new Map();
	for (const t of report.passes) state.set(t.fullTitle, { ok: true });
	for (const t of report.failures) state.set(t.fullTitle, { ok: false, err: (t.err && t.err.message || '').split('\n')[0] });
	for (const t of report.pending) state.set(t.fullTitle, { ok: null });
	return { report, state, seconds: (Date.now() - t0) / 1000 };
}

const bsq = run('better-sqlite3');
const lite = run('litelane');
const passedBoth = [...bsq.state].filter(([k, v]) => v.ok && lite.state.get(k) && lite.state.get(k).ok);
const bsqPassed = [...bsq.state].filter(([, v]) => v.ok);
const differences = bsqPassed.filter(([k]) => !(lite.state.get(k) && lite.state.get(k).ok));
const pct = (100 * passedBoth.length / bsqPassed.length).toFixed(1);

const byFile = new Map();
for (const t of bsq.report.tests) {
	const f = path.basename(t.file || '?');
	const e = byFile.get(f) || { bsq: 0, lite: 0 };
	const k = t.fullTitle;
	if (bsq.state.get(k) && bsq.state.get(k).ok) e.bsq++;
	if (bsq.state.get(k) && bsq.state.get(k).ok && lite.state.get(k) && lite.state.get(k).ok) e.lite++;
	byFile.set(f, e);
}
console.log('\n| test file | pass on better-sqlite3 | of those, pass on litelane |');
console.log('|---|---:|---:|');
for (const [f, e] of [...byFile].sort()) console.log(`| ${f} | ${e.bsq} | ${e.lite} |`);
console.log(`\nbetter-sqlite3 12.11.1: ${bsq.report.stats.passes} passed, ${bsq.report.stats.failures} failed, ${bsq.report.stats.pending} pending (${bsq.seconds.toFixed(1)} s)`);
console.log(`litelane:               ${lite.report.stats.passes} passed, ${lite.report.stats.failures} failed, ${lite.report.stats.pending} pending (${lite.seconds.toFixed(1)} s)`);
console.log(`of better-sqlite3's ${bsqPassed.length} passing tests, ${passedBoth.length} pass on litelane: ${pct}%`);
console.log(`\ndifferences (pass on better-sqlite3, not on litelane): ${differences.length}`);
for (const [k] of differences) {
	const l = lite.state.get(k);
	console.log(`- ${k}: ${l ? (l.ok === null ? 'pending' : l.err) : 'not run'}`);
}
console.log(`\nwall time ${((Date.now() - started) / 1000).toFixed(1)} s`);
