"""Measuring: readings taken over a stretch of code, in the order the code runs.

``peak`` watches one measurement (the programs it runs, a background sampler, the test body's
frame kept to its end) and hands back its readings; ``leak`` runs code again and again and reads
every source after each run. Neither decides anything: decisions/ judges what they read."""
