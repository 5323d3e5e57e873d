// Subtly wrong: the enable takes priority over the reset, so a reset while enabled still counts.
module counter (
    input  wire       clk,
    input  wire       rst,
    input  wire       en,
    output reg  [7:0] count
);
    always @(posedge clk) begin
        if (en)
            count <= count + 8'd1;
        else if (rst)
            count <= 8'd0;
    end
endmodule
