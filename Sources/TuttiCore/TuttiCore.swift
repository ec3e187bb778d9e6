// TuttiCore: media time, clocks, formats, PCM buffers and the lock-free ring. No I/O.
