// GMP, the GNU multiple precision library: the 3072-bit modular arithmetic of SRP-6a
// (AirPlay 2's pairing, docs/AIRPLAY.md). Its functions are reached by their real names
// (`__gmpz_powm_sec`): gmp.h names them through macros Swift does not import.
#include <gmp.h>
