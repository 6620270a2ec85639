# S1 latency distribution (percentile plot, log x = 1/(1-quantile)) from the
# bench/results/s1-SYSTEM.dat files the harness writes with --dist.
# Run from the repository root: gnuplot bench/scripts/plot_s1.gp
set terminal pngcairo size 1000,600 noenhanced font ",11"
set output "bench/results/s1_latency.png"
set title "S1 fan-out: publish -> deliver latency by percentile (1,000 subscribers, 20 msg/s, server on 1 core)"
set logscale x
set logscale y
set xlabel "percentile"
set ylabel "latency (ms)"
set xtics ("0%%" 1, "50%%" 2, "90%%" 10, "99%%" 100, "99.9%%" 1000, "99.99%%" 10000, "99.999%%" 100000)
set grid xtics ytics mytics
set key top left
files = system("ls bench/results/s1-*.dat 2>/dev/null")
label(f) = system("basename ".f." .dat | sed 's/^s1-//'")
plot for [f in files] f using 3:2 with linespoints pointsize 0.6 title label(f)
